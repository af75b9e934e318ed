"""Probe handlers: each records its execution (job id, attempt, worker, pid) in the database."""

from __future__ import annotations

import asyncio
import os
import time

from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

import django_ojs
from django_ojs.handlers.context import JobContext

from .models import Execution


@django_ojs.job("probe.record")
def record(ctx: JobContext, seconds: float = 0.0, first_attempt_seconds: float | None = None) -> dict:
    """Sleep ``seconds`` (``first_attempt_seconds`` on attempt 1), ignoring cancellation."""
    run = Execution.objects.create(job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid())
    pause = first_attempt_seconds if ctx.attempt == 1 and first_attempt_seconds is not None else seconds
    if pause:
        time.sleep(pause)
    Execution.objects.filter(pk=run.pk).update(finished_at=timezone.now())
    return {"attempt": ctx.attempt, "pid": os.getpid()}


@django_ojs.job("probe.cooperative")
def cooperative(ctx: JobContext, seconds: float, every: float = 1.0) -> None:
    """Work for ``seconds``, checking ``ctx.cancelled`` every ``every`` seconds and returning when it is set."""
    run = Execution.objects.create(job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid())
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not ctx.cancelled:
        time.sleep(every)
    Execution.objects.filter(pk=run.pk).update(finished_at=timezone.now())


@django_ojs.job("probe.noop")
def noop(ctx: JobContext) -> None:
    """No side effect at all: for throughput."""


@django_ojs.job("probe.queries_logged")
def queries_logged(ctx: JobContext) -> int:
    """One query, then how many queries this thread's connection has logged (DEBUG = True logs them)."""
    from django.db import connection

    Execution.objects.filter(pk=0).exists()
    return len(connection.queries_log)


@django_ojs.job("probe.heartbeat")
def heartbeat(ctx: JobContext, seconds: float) -> None:
    """Call ctx.heartbeat() while working, as a long job with a short visibility timeout should."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.heartbeat()
        time.sleep(0.2)


class ProbeError(Exception):
    pass


@django_ojs.job("probe.explode")
def explode(ctx: JobContext, message: str) -> None:
    raise ProbeError(message)


@django_ojs.job("probe.collect")
def collect(ctx: JobContext, value: object) -> dict:
    """A workflow step: returns its value and the results it was given (ctx.parent_results)."""
    Execution.objects.create(job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid())
    return {"value": value, "seen": ctx.parent_results}


@django_ojs.job("probe.trace_context")
def trace_context(ctx: JobContext) -> dict:
    """The span current while the handler runs, as its own spans and calls would see it (tests/worker/test_tracing.py)."""
    from opentelemetry import trace

    span = trace.get_current_span()
    context = span.get_span_context()
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}",
            "sampled": context.trace_flags.sampled, "recording": span.is_recording()}


# -- async def handlers (tests/worker/test_async_handlers.py) -------------------------


@django_ojs.job("probe.async_record")
async def async_record(ctx: JobContext, seconds: float = 0.0) -> dict:
    """``probe.record`` as a coroutine: the ORM's async methods, asyncio.sleep."""
    run = await Execution.objects.acreate(
        job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid()
    )
    if seconds:
        await asyncio.sleep(seconds)
    await Execution.objects.filter(pk=run.pk).aupdate(finished_at=timezone.now())
    return {"attempt": ctx.attempt, "async": True}


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@django_ojs.job("probe.async_backend")
async def async_backend(ctx: JobContext) -> dict:
    """An ORM write through the async API, then the PostgreSQL session it ran on."""
    await Execution.objects.acreate(job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid())
    return {"backend": await sync_to_async(_backend_pid)()}


def _pg_sleep(seconds: float) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(%s)", [seconds])


@django_ojs.job("probe.async_query")
async def async_query(ctx: JobContext, seconds: float) -> None:
    """An async handler whose database work takes ``seconds`` (a query that sleeps)."""
    run = await Execution.objects.acreate(job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid())
    await sync_to_async(_pg_sleep)(seconds)
    await Execution.objects.filter(pk=run.pk).aupdate(finished_at=timezone.now())


@django_ojs.job("probe.backend")
def backend(ctx: JobContext) -> dict:
    """``probe.async_backend`` as a plain handler."""
    Execution.objects.create(job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid())
    return {"backend": _backend_pid()}


@django_ojs.job("probe.async_forever")
async def async_forever(ctx: JobContext) -> None:
    """Awaits an hour unless its task is cancelled; stamps finished_at when it is."""
    run = await Execution.objects.acreate(
        job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid()
    )
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await Execution.objects.filter(pk=run.pk).aupdate(finished_at=timezone.now())
        raise


@django_ojs.job("probe.async_progress_then_fail", retry={"max_attempts": 1})
async def async_progress_then_fail(ctx: JobContext) -> None:
    """Two progress reports within the throttle interval, then a failure: the second is held back."""
    ctx.progress(0.25, {"step": "first"})
    ctx.progress(0.5, {"step": "last"})
    raise RuntimeError("failed after reporting progress")


@django_ojs.job("probe.snooze")
def snooze(ctx: JobContext, times: int, seconds: float = 0.2, returned: bool = False) -> dict:
    """Snooze ``times`` times (raised, or ``returned``), then complete with what it saw."""
    Execution.objects.create(job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid())
    if ctx.snoozes < times:
        if returned:
            return django_ojs.Snooze(seconds)
        raise django_ojs.Snooze(seconds)
    return {"snoozes": ctx.snoozes, "attempt": ctx.attempt}


@django_ojs.job("probe.await_signal")
def await_signal(ctx: JobContext, name: str, timeout: float, default: object = "no default") -> dict:
    """Wait for signal ``name``; return its payload, or ``default`` on timeout ("no default": raise)."""
    Execution.objects.create(job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid())
    if default == "no default":
        payload = ctx.wait_for_signal(name, timeout)
    else:
        payload = ctx.wait_for_signal(name, timeout, default=default)
    return {"payload": payload}


@django_ojs.job("probe.async_snooze_then_wait")
async def async_snooze_then_wait(ctx: JobContext, name: str) -> dict:
    """Snooze once (returned), then wait for signal ``name`` in a thread, as the how-to says."""
    if ctx.snoozes < 1:
        return django_ojs.Snooze(0.2)
    payload = await asyncio.to_thread(ctx.wait_for_signal, name, 3600)
    return {"payload": payload, "snoozes": ctx.snoozes}
# -- awaiting results and growing batches (tests/worker/test_awaiting.py) ---------


@django_ojs.job("probe.grow")
def grow(ctx: JobContext, values: list) -> dict:
    """A batch's job that adds a ``probe.collect`` job to its own batch for each value, then returns."""
    added = ctx.add_to_batch(*(collect.s(value) for value in values))
    return {"added": [str(job.id) for job in added]}


@django_ojs.job("probe.gather")
def gather(ctx: JobContext) -> dict:
    """A batch's callback: what it was given, and where (its job id, for counting how often it ran)."""
    Execution.objects.create(job_id=ctx.job.id, attempt=ctx.attempt, worker_id=ctx.worker_id, pid=os.getpid())
    return {"seen": ctx.parent_results}
