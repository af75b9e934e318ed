"""Operator and producer moves: cancel, activate, discard, and the dead letter's retry and purge.

Each is one conditional UPDATE guarded by the move's source states; when it
changes nothing, a read tells the caller why (missing, or in which state).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from ..models import Job, JobError
from ..protocol.errors import NotFound
from ..protocol.states import TERMINAL, JobState, Move, sources, target
from . import events
from .clock import TxNow
from .dead_letter import is_dead_letter
from .durable import forget_steps
from .moves import cancel_rows, discard_changes, resurrect_changes
from .refusal import refusal
from .row_movement import retried_on_row_movement
from .unique_keys import reentry_guard
from .workflows import advance as advance_workflows


@retried_on_row_movement
def cancel(job_id: Any) -> tuple[Job, str | None]:
    """Cancel a job that has not finished; return it and the state it left.

    Idempotent on finished jobs (ojs-core §7.6 rule 4): a completed,
    discarded or cancelled job is returned unchanged with ``None``. An
    active job is cancelled at once (§7.6 rule 2); its worker learns it
    from the next heartbeat reply and any later ACK or FAIL gets a 409.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update().annotate(db_now=TxNow()).filter(id=job_id).first()
        if job is None:
            raise refusal(None, job_id, Move.CANCEL)
        if job.state in TERMINAL:
            return job, None
        previous = job.state
        cancel_rows([job], job.db_now)
        job.refresh_from_db()
        advance_workflows({job.seq: job.state})
    return job, previous


@retried_on_row_movement
def activate(job_id: Any) -> Job:
    """pending -> available (ojs-core §6.3, ACTIVATE)."""
    with transaction.atomic():
        job = _move(job_id, Move.ACTIVATE, enqueued_at=TxNow())
        assert job.enqueued_at is not None  # the move set it
        events.record([events.job_event("job.enqueued", job, job.enqueued_at, activated=True)])
    return job


@retried_on_row_movement
def resurrect(job_id: Any, *, missing: str = "dead letter job", dead_letter_only: bool = False) -> Job:
    """Manual retry of a discarded job: discarded -> available with fresh attempts.

    ojs-core §6.3 resets ``attempt`` to 0; ojs-dead-letter §6.1 keeps the
    error history (the ``errors`` rows) for the next post-mortem, so only
    the current ``error`` is cleared. ``missing`` names what was not found
    (the dead letter's door says "dead letter job", the admin API "job").
    ``dead_letter_only``: the dead letter's doors, for which a plain discard
    is not there at all (404, core/dead_letter.py); operators' doors retry both.
    """
    # One transaction for the move and its event (DESIGN invariant 9); a
    # live job holding this one's unique key refuses it (core/unique_keys.py).
    with reentry_guard(job_id), transaction.atomic():
        job = _move(job_id, Move.RESURRECT, missing=missing,
                    only_if=is_dead_letter if dead_letter_only else None, **resurrect_changes(TxNow()))
        assert job.enqueued_at is not None  # the move set it
        events.record([events.job_event("job.enqueued", job, job.enqueued_at, retried_from_dead_letter=True)])
    return job


@retried_on_row_movement
def discard(job_id: Any) -> Job:
    """An operator gives up on a job that is still waiting: -> discarded."""
    with transaction.atomic():
        job = _move(job_id, Move.DISCARD, **discard_changes(TxNow()))
        advance_workflows({job.seq: job.state})
    return job


@retried_on_row_movement
def purge_dead(job_id: Any, *, dead_letter_only: bool = False) -> None:
    """Delete a discarded job and its history and events for good (ojs-http-binding §12.3).

    ``dead_letter_only``: as ``resurrect``'s, a plain discard is not found.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(id=job_id).first()  # by id alone, as _move
        if job is None or job.state != JobState.DISCARDED or (dead_letter_only and not is_dead_letter(job)):
            raise NotFound(
                f"dead letter job {job_id} not found",
                details={"resource_type": "dead_letter_job", "resource_id": str(job_id)},
            )
        JobError.objects.filter(job_id=job.seq).delete()
        forget_steps([job.seq])
        events.forget_jobs([job.id])
        Job.objects.filter(seq=job.seq).delete()


def _move(
    job_id: Any, move: Move, *, missing: str = "job", only_if: Callable[[Job], bool] | None = None, **changes: Any
) -> Job:
    """One job's ``move``, under its row lock.

    The row is found by ``id`` alone and its state checked once it is
    locked, then written by ``seq``: with the state in the WHERE clause,
    statistics taken while the backlog was all available let PostgreSQL
    walk ``ojs_job_queue_state`` -- every finished job -- for one row
    (tests/core/test_query_plans.py).
    """
    with transaction.atomic():
        # The locked row also explains a refusal: no second read of it.
        job = Job.objects.select_for_update().filter(id=job_id).first()
        # A row the move cannot take from its state, or that ``only_if`` refuses, is not among the
        # rows the caller's door serves (the dead letter's: a completed job is not in it): not found there.
        if job is not None and only_if is not None and not (JobState(job.state) in sources(move) and only_if(job)):
            job = None
        if job is None or JobState(job.state) not in sources(move):
            if job is None and missing != "job":
                raise NotFound(
                    f"{missing} {job_id} not found",
                    details={"resource_type": missing.replace(" ", "_"), "resource_id": str(job_id)},
                )
            raise refusal(job, job_id, move)
        Job.objects.filter(seq=job.seq).update(state=target(move), **changes)
        job = Job.objects.get(seq=job.seq)
    return job
