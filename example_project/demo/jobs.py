"""Sample handlers of the demo (``manage.py ojs_demo``): one succeeds, one fails once, one sleeps;
and a durable one in three steps (docs/explanation/reliability.md's walkthrough)."""

from __future__ import annotations

import logging
import random
import time

import django_ojs
from django_ojs.handlers.context import JobContext

logger = logging.getLogger("example_project.demo")


@django_ojs.job("demo.noop")
def noop(ctx: JobContext) -> None:
    """Does nothing: the benchmark's job."""


@django_ojs.job("demo.spin")
def spin(ctx: JobContext, ms: float = 1.0) -> None:
    """Uses ``ms`` milliseconds of its thread's CPU, in plain Python: the benchmark's job with work in it (--job-cpu-ms).

    It reads the thread's CPU clock between chunks of arithmetic (~40 µs
    each), not in a tight loop: that clock is a system call on Linux, and a
    job made of nothing else spent 60 % of its CPU in the kernel, evicting
    the caches the worker's own code then ran on. A loop calibrated once
    instead would not hold the CPU steady: the same loop runs up to twice as
    fast in one process as in another here, and slower while ten threads
    contend for the GIL.
    """
    until = time.thread_time() + ms / 1000
    while time.thread_time() < until:
        _burn(1_000)


def _burn(loops: int) -> int:
    total = 0
    for number in range(loops):
        total += number
    return total


@django_ojs.job("demo.greet", queue="default")
def greet(ctx: JobContext, name: str = "world") -> dict:
    """Succeeds at once with a result."""
    return {"greeting": f"Hello, {name}!", "attempt": ctx.attempt}


class FlakyServiceError(Exception):
    """Stands in for a remote service that is down for a moment."""


@django_ojs.job("demo.flaky", retry={"max_attempts": 3, "initial_interval": "PT1S"})
def flaky(ctx: JobContext, order_id: int) -> dict:
    """Fails on its first attempt, succeeds on the retry."""
    if ctx.attempt == 1:
        raise FlakyServiceError(f"payment service unavailable for order {order_id}")
    return {"order_id": order_id, "charged": True, "attempt": ctx.attempt}


@django_ojs.job("demo.sleep", timeout=120)
def sleep(ctx: JobContext, seconds: float = 3.0) -> dict:
    """Works for a while, stopping early if the job is cancelled or the worker shuts down."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.raise_if_cancelled()
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    return {"slept": seconds, "jitter": round(random.random(), 3)}


@django_ojs.job("demo.fulfil", retry={"max_attempts": 3, "initial_interval": "PT1S"})
def fulfil(ctx: JobContext, order_id: int, seconds: float = 4.0) -> dict:
    """Three durable steps of a few seconds each: a worker killed mid-way, the retry resumes at the step it was in."""

    def step(name: str) -> dict:
        logger.info("order %s: %s runs in attempt %s", order_id, name, ctx.attempt)
        time.sleep(seconds)  # the work: a payment, a parcel, a label
        return {"done": name, "attempt": ctx.attempt}

    for name in ("charge", "pack", "ship"):
        ctx.run_step(name, step, name)
    return {"order_id": order_id, "attempt": ctx.attempt}
