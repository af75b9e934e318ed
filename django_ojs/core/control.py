"""Operator and producer moves: cancel, activate, and the dead letter's retry and purge.

Each is one conditional UPDATE guarded by the move's source states; when it
changes nothing, a read tells the caller why (missing, or in which state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction

from ..errors import NotFound
from ..states import TERMINAL, JobState, Move, sources, target
from . import events
from .clock import TxNow
from .outcome import refusal

if TYPE_CHECKING:
    from ..models import Job


class ControlMixin:
    def cancel(self, job_id: Any) -> tuple[Job, str | None]:
        """Cancel a job that has not finished; return it and the state it left.

        Idempotent on finished jobs (ojs-core §7.6 rule 4): a completed,
        discarded or cancelled job is returned unchanged with ``None``. An
        active job is cancelled at once (§7.6 rule 2); its worker learns it
        from the next heartbeat reply and any later ACK or FAIL gets a 409.
        """
        now_ = TxNow()
        with transaction.atomic():
            job = self.select_for_update().filter(id=job_id).first()
            if job is None:
                raise refusal(None, job_id, Move.CANCEL)
            if job.state in TERMINAL:
                return job, None
            previous = job.state
            self.filter(seq=job.seq, state__in=sources(Move.CANCEL)).update(
                state=target(Move.CANCEL), finished_at=now_, lease_expires_at=None, deadline_at=None, run_at=None
            )
            job.refresh_from_db()
            events.record([events.job_event("job.cancelled", job, job.finished_at, previous_state=previous)])
        return job, previous

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
        # One transaction for the move and its event (DESIGN invariant 9).
        with transaction.atomic():
            job = self._move(
                job_id,
                Move.RESURRECT,
                attempt=0,
                releases=0,
                enqueued_at=TxNow(),
                started_at=None,
                completed_at=None,
                finished_at=None,
                error=None,
                result=None,
                retry_delay_ms=None,
                dead_letter=False,
                missing="dead letter job",
            )
            events.record([events.job_event("job.enqueued", job, job.enqueued_at, retried_from_dead_letter=True)])
        return job

    def discard(self, job_id: Any) -> Job:
        """An operator gives up on a job that is still waiting: -> discarded."""
        return self._move(job_id, Move.DISCARD, finished_at=TxNow(), run_at=None)

    def purge_dead(self, job_id: Any) -> None:
        """Delete a discarded job and its history for good (ojs-http-binding §12.3)."""
        from ..models import JobError

        with transaction.atomic():
            job = self.select_for_update().filter(id=job_id, state=JobState.DISCARDED).first()
            if job is None:
                raise NotFound(
                    f"dead letter job {job_id} not found",
                    details={"resource_type": "dead_letter_job", "resource_id": str(job_id)},
                )
            JobError.objects.filter(job_id=job.seq).delete()
            self.filter(seq=job.seq).delete()

    def _move(self, job_id: Any, move: Move, *, missing: str = "job", **changes: Any) -> Job:
        with transaction.atomic():
            changed = self.filter(id=job_id, state__in=sources(move)).update(state=target(move), **changes)
            job = self.filter(id=job_id).first()
            if not changed:
                if job is None and missing != "job":
                    raise NotFound(
                        f"{missing} {job_id} not found",
                        details={"resource_type": missing.replace(" ", "_"), "resource_id": str(job_id)},
                    )
                raise refusal(job, job_id, move)
        return job
