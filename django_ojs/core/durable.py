"""Durable jobs: the steps a handler completed, recorded on the lease that ran them.

A step record is written in a transaction that holds the job's row and
re-checks the lease (job, attempt, worker): an attempt the reaper recovered,
or a job cancelled meanwhile, records nothing. One record per step name per
job (a unique constraint): a retry finds it and skips the step. Checkpoints
ride progress reports (``core/progress.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import F, Value

from ..models import Job, JobStep
from ..protocol.errors import InvalidTransition, NotFound
from ..protocol.states import JobState
from . import events
from .clock import TxNow
from .row_movement import retried_on_row_movement


@retried_on_row_movement
def record_step(
    job_id: Any, name: str, result: Any, *, attempt: int, worker_id: str | None = None
) -> tuple[JobStep, bool]:
    """Record that step ``name`` of ``attempt`` completed with ``result``; (the record, whether it is new).

    The row is waited for, not skipped: the handler needs to know whether its
    step counts. Only the job's row is locked (the project's order holds:
    no worker row, one job row). A step already recorded is returned as it
    is, with False: a repeated request (a retry of the PUT after a lost
    reply) changes nothing. The record extends the lease, as a heartbeat
    would, and records a ``job.step_completed`` event.

    Raises NotFound for no such job, InvalidTransition (409) when the lease
    no longer holds: the job is not active, or another attempt or worker
    holds it.
    """
    with transaction.atomic():
        job = (
            Job.objects.select_for_update()
            .filter(id=job_id)
            .only("seq", "id", "type", "queue", "state", "attempt", "worker_id")
            .annotate(db_now=TxNow())  # the transaction's instant, read with the row: no round trip of its own
            .first()
        )
        if job is None:
            raise NotFound(f"job {job_id} not found", details={"resource_type": "job", "resource_id": str(job_id)})
        if job.state != JobState.ACTIVE or job.attempt != attempt or (worker_id and job.worker_id not in (None, worker_id)):
            raise InvalidTransition(
                f"cannot record step {name!r} of job {job.id}: attempt {attempt} no longer holds it "
                f"(the job is {job.state}, attempt {job.attempt})",
                job_id=str(job.id),
                current_state=job.state,
                details={"attempt": job.attempt, "worker_id": job.worker_id if job.state == JobState.ACTIVE else None},
            )
        existing = JobStep.objects.filter(job_id=job.seq, name=name).first()
        if existing is not None:
            return existing, False
        now = job.db_now
        step = JobStep.objects.create(job_id=job.seq, name=name, attempt=attempt, result=result, recorded_at=now)
        Job.objects.filter(seq=job.seq).update(
            lease_expires_at=Value(now) + F("visibility_timeout"), step_count=F("step_count") + 1
        )
        events.record([events.job_event("job.step_completed", job, now, step=name, worker_id=job.worker_id)])
    return step, True


def steps_of(job: Job) -> list[JobStep]:
    """A job's recorded steps, in the order they were recorded; no query for a job that recorded none."""
    return list(JobStep.objects.filter(job_id=job.seq).order_by("id")) if job.step_count else []


def steps_by_job(jobs: Iterable[Job]) -> dict[int, list[JobStep]]:
    """The recorded steps of ``jobs``, by seq: one read, and none when no job has recorded a step
    (``Job.step_count``), so a FETCH of jobs that use no steps pays nothing."""
    seqs = [job.seq for job in jobs if job.step_count]
    found: dict[int, list[JobStep]] = {}
    if seqs:
        for step in JobStep.objects.filter(job_id__in=seqs).order_by("id"):
            found.setdefault(step.job_id, []).append(step)
    return found


def forget_steps(seqs: list[int]) -> int:
    """Delete the steps of jobs about to be deleted (in the caller's transaction)."""
    return JobStep.objects.filter(job_id__in=seqs)._raw_delete(JobStep.objects.db)
