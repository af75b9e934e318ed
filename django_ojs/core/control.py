"""Operator and producer moves: cancel, activate, and the dead letter's retry and purge.

Each is one conditional UPDATE guarded by the move's source states; when it
changes nothing, a read tells the caller why (missing, or in which state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction

from ..errors import NotFound
from ..states import TERMINAL, JobState, Move, sources, target
from . import events, unique
from .clock import TxNow
from .outcome import refusal
from .workflows import advance as advance_workflows

if TYPE_CHECKING:
    from ..models import Job


def cancel_changes(now: Any) -> dict[str, Any]:
    """The columns CANCEL writes (besides the state): the job is finished and holds nothing."""
    return {"finished_at": now, "lease_expires_at": None, "deadline_at": None, "run_at": None}


def resurrect_changes(now: Any) -> dict[str, Any]:
    """The columns a dead letter retry writes: fresh attempts, no current error or result."""
    return {
        "attempt": 0,
        "releases": 0,
        "enqueued_at": now,
        "started_at": None,
        "completed_at": None,
        "finished_at": None,
        "error": None,
        "result": None,
        "retry_delay_ms": None,
        "dead_letter": False,
    }


def discard_changes(now: Any) -> dict[str, Any]:
    return {"finished_at": now, "run_at": None}


class ControlMixin:
    def cancel(self, job_id: Any) -> tuple[Job, str | None]:
        """Cancel a job that has not finished; return it and the state it left.

        Idempotent on finished jobs (ojs-core §7.6 rule 4): a completed,
        discarded or cancelled job is returned unchanged with ``None``. An
        active job is cancelled at once (§7.6 rule 2); its worker learns it
        from the next heartbeat reply and any later ACK or FAIL gets a 409.
        """
        with transaction.atomic():
            job = self.select_for_update().annotate(db_now=TxNow()).filter(id=job_id).first()
            if job is None:
                raise refusal(None, job_id, Move.CANCEL)
            if job.state in TERMINAL:
                return job, None
            previous = job.state
            self.cancel_rows([job], job.db_now)
            job.refresh_from_db()
            advance_workflows({job.seq: job.state})
        return job, previous

    def cancel_rows(self, jobs: list[Job], now: Any) -> int:
        """Cancel locked unfinished jobs in one UPDATE, each with its job.cancelled event.

        The caller advances their workflows, or is the workflow's own cancel.
        """
        if not jobs:
            return 0
        self.filter(seq__in=[job.seq for job in jobs], state__in=sources(Move.CANCEL)).update(
            state=target(Move.CANCEL), **cancel_changes(now)
        )
        cancelled = []
        for job in jobs:
            previous, job.state, job.finished_at = job.state, target(Move.CANCEL), now
            cancelled.append(events.job_event("job.cancelled", job, now, previous_state=previous))
        events.record(cancelled)
        return len(jobs)

    def activate(self, job_id: Any) -> Job:
        """pending -> available (ojs-core §6.3, ACTIVATE)."""
        with transaction.atomic():
            job = self._move(job_id, Move.ACTIVATE, enqueued_at=TxNow())
            events.record([events.job_event("job.enqueued", job, job.enqueued_at, activated=True)])
        return job

    def resurrect(self, job_id: Any) -> Job:
        """Manual retry from the dead letter: discarded -> available with fresh attempts.

        ojs-core §6.3 resets ``attempt`` to 0; ojs-dead-letter §6.1 keeps the
        error history (the ``errors`` rows) for the next post-mortem, so only
        the current ``error`` is cleared.
        """
        # One transaction for the move and its event (DESIGN invariant 9); a
        # live job holding this one's unique key refuses it (core/unique.py).
        with unique.reentry_guard(self, job_id), transaction.atomic():
            job = self._move(job_id, Move.RESURRECT, missing="dead letter job", **resurrect_changes(TxNow()))
            events.record([events.job_event("job.enqueued", job, job.enqueued_at, retried_from_dead_letter=True)])
        return job

    def discard(self, job_id: Any) -> Job:
        """An operator gives up on a job that is still waiting: -> discarded."""
        with transaction.atomic():
            job = self._move(job_id, Move.DISCARD, **discard_changes(TxNow()))
            advance_workflows({job.seq: job.state})
        return job

    def purge_dead(self, job_id: Any) -> None:
        """Delete a discarded job and its history for good (ojs-http-binding §12.3)."""
        from ..models import JobError

        with transaction.atomic():
            job = self.select_for_update().filter(id=job_id).first()  # by id alone, as _move
            if job is None or job.state != JobState.DISCARDED:
                raise NotFound(
                    f"dead letter job {job_id} not found",
                    details={"resource_type": "dead_letter_job", "resource_id": str(job_id)},
                )
            JobError.objects.filter(job_id=job.seq).delete()
            self.filter(seq=job.seq).delete()

    def dead_letter_stats(self) -> dict[str, Any]:
        """ojs-dead-letter §10.1: discarded jobs by queue and last error type, and their span."""
        from django.db.models import Count, Max, Min
        from django.db.models.fields.json import KeyTextTransform

        dead = self.filter(state=JobState.DISCARDED)
        span = dead.aggregate(total=Count("seq"), oldest=Min("finished_at"), newest=Max("finished_at"))
        by_queue = dict(dead.values_list("queue").annotate(n=Count("seq")).order_by())
        by_type = (
            dead.annotate(error_type=KeyTextTransform("type", "error"))
            .values_list("error_type")
            .annotate(n=Count("seq"))
            .order_by()
        )
        return {
            **span,
            "dead_letter": dead.filter(dead_letter=True).count(),
            "by_queue": by_queue,
            "by_error_type": {error_type or "Unknown": n for error_type, n in by_type},
        }

    def _move(self, job_id: Any, move: Move, *, missing: str = "job", **changes: Any) -> Job:
        """One job's ``move``, under its row lock.

        The row is found by ``id`` alone and its state checked once it is
        locked, then written by ``seq``: with the state in the WHERE clause,
        statistics taken while the backlog was all available let PostgreSQL
        walk ``ojs_job_queue_state`` -- every finished job -- for one row
        (tests/core/test_query_plans.py).
        """
        with transaction.atomic():
            # The locked row also explains a refusal: no second read of it.
            job = self.select_for_update().filter(id=job_id).first()
            if job is None or JobState(job.state) not in sources(move):
                if job is None and missing != "job":
                    raise NotFound(
                        f"{missing} {job_id} not found",
                        details={"resource_type": missing.replace(" ", "_"), "resource_id": str(job_id)},
                    )
                raise refusal(job, job_id, move)
            self.filter(seq=job.seq).update(state=target(move), **changes)
            job = self.get(seq=job.seq)
        return job
