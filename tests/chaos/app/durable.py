"""The chaos run's durable handler: ``DURABLE_STEPS`` steps run with ``ctx.run_step``.

Each step's body writes its side effect (a ``StepEffect`` row, in autocommit,
retried through an outage) before it works, and returns the attempt that ran
it, which becomes the step's record. A worker killed mid-job leaves some
steps recorded; the verdict (``tests/chaos/durable.py``) checks that no
attempt ran again the body of a step an earlier attempt had recorded.
"""

from __future__ import annotations

import os
import time
from typing import Any

from django.utils import timezone

import django_ojs
from django_ojs.handlers.context import JobContext

from ..plan import DURABLE_STEPS, KINDS, expected_result, step_names, step_result
from .jobs import persist, recorded
from .models import StepEffect


def _step(ctx: JobContext, step: str, seconds: float) -> dict[str, Any]:
    effect = StepEffect(job_id=ctx.job.id, step=step, attempt=ctx.attempt, pid=os.getpid(), at=timezone.now())
    persist(lambda: StepEffect.objects.bulk_create([effect]))
    time.sleep(seconds)
    return step_result(step, ctx.attempt)


def run_durable(ctx: JobContext, kind: str, index: int, seconds: float) -> dict[str, Any]:
    with recorded(ctx):
        for step in step_names():
            ctx.run_step(step, _step, ctx, step, seconds / DURABLE_STEPS)
        return expected_result(kind, index, ctx.attempt)


django_ojs.job(KINDS["durable"].type, **KINDS["durable"].options())(run_durable)
