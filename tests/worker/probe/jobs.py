"""Probe handlers: each records its execution (job id, attempt, worker, pid) in the database."""

from __future__ import annotations

import os
import time

from django.utils import timezone

import django_ojs
from django_ojs.worker.context import JobContext

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


@django_ojs.job("probe.noop")
def noop(ctx: JobContext) -> None:
    """No side effect at all: for throughput."""


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
