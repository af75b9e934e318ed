"""Workers: registration, heartbeats (BEAT), directives, and dead-worker recovery.

A heartbeat is a constant number of statements whatever the number of jobs
it carries: it refreshes the worker row, extends the leases of all the jobs
it lists in one UPDATE, and answers the operator's directive
(ojs-worker-protocol §4). A worker exists for the reaper only once it has
registered or sent a heartbeat: a client that only FETCHes is protected by
the visibility timeout alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, models, transaction
from django.db.models import F, Q, Value

from ..conf import ojs_settings
from ..failure import Failure
from ..states import JobState, WorkerState
from . import events
from .clock import TxNow, db_now
from .outcome import Settle, settle_rows

if TYPE_CHECKING:
    from ..models import Worker


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker says about itself (ojs-worker-protocol §3.1); None = not told."""

    hostname: str | None = None
    pid: int | None = None
    queues: list[str] | None = None
    concurrency: int | None = None
    labels: list[str] | None = None
    started_at: dt.datetime | None = None

    def fields(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if value is not None}


@dataclass(frozen=True)
class BeatReply:
    directive: WorkerState
    server_time: dt.datetime
    jobs_extended: list[str] = field(default_factory=list)
    # Jobs the worker listed that were cancelled meanwhile: it should stop them.
    jobs_cancelled: list[str] = field(default_factory=list)
    # Jobs the worker listed that it no longer holds (reaped, or claimed by
    # another worker): finishing them will be refused.
    jobs_lost: list[str] = field(default_factory=list)


class WorkerManager(models.Manager):
    def register(self, worker_id: str, info: WorkerInfo = WorkerInfo()) -> Worker:
        """Create or replace the worker's row (ojs-worker-protocol §3.1)."""
        with transaction.atomic():
            now = db_now()
            worker, created = self.update_or_create(
                id=worker_id,
                defaults={
                    **info.fields(),
                    "state": WorkerState.RUNNING,
                    "last_heartbeat_at": now,
                },
                create_defaults={
                    **info.fields(),
                    "state": WorkerState.RUNNING,
                    "directive": WorkerState.RUNNING,
                    "registered_at": now,
                    "last_heartbeat_at": now,
                },
            )
            if created:
                events.record([events.worker_event("worker.started", worker, now)])
        return worker

    def beat(
        self,
        worker_id: str,
        *,
        state: WorkerState | None = None,
        active_job_ids: Sequence[str] = (),
        visibility_timeout: dt.timedelta | None = None,
        info: WorkerInfo = WorkerInfo(),
    ) -> BeatReply:
        """Record a heartbeat, extend the listed jobs' leases, answer the directive."""
        from ..models import Job

        ids = list(dict.fromkeys(active_job_ids))
        with transaction.atomic():
            worker = self.select_for_update().annotate(db_now=TxNow()).filter(id=worker_id).first()
            now = worker.db_now if worker else db_now()
            if worker is None:
                worker = self._create_on_beat(worker_id, info, now)
            worker.last_heartbeat_at = now
            worker.state = state or worker.state or WorkerState.RUNNING
            worker.active_job_ids = ids
            worker.active_jobs = len(ids)
            for name, value in info.fields().items():
                setattr(worker, name, value)
            worker.save()
            held, cancelled, lost, hints = _classify(Job, worker_id, ids)
            if held:
                lease = Value(visibility_timeout) if visibility_timeout else F("visibility_timeout")
                # Unowned jobs (fetched without a worker id) are adopted by the
                # worker that reports them, so its death recovers them too. The
                # owner is checked again in the write: a job reaped and claimed
                # by another worker since _classify read it stays with that worker.
                extended = Job.objects.filter(
                    Q(worker_id=worker_id) | Q(worker_id__isnull=True),
                    seq__in=held.values(),
                    state=JobState.ACTIVE,
                ).update(lease_expires_at=Value(now) + lease, worker_id=worker_id)
                if extended < len(held):
                    # Lost that race: answer with what the jobs are now.
                    held, cancelled, lost, hints = _classify(Job, worker_id, ids)
        directive = WorkerState(worker.directive)
        if ojs_settings.TEST_HOOKS and hints:
            directive = hints[0]
        return BeatReply(
            directive=directive,
            server_time=now,
            jobs_extended=list(held),
            jobs_cancelled=cancelled,
            jobs_lost=lost,
        )

    def _create_on_beat(self, worker_id: str, info: WorkerInfo, now: dt.datetime) -> Worker:
        """A heartbeat from an unknown worker registers it (ojs-worker-protocol §3.1 is a SHOULD)."""
        try:
            with transaction.atomic():
                worker = self.create(
                    id=worker_id,
                    state=WorkerState.RUNNING,
                    registered_at=now,
                    last_heartbeat_at=now,
                    **info.fields(),
                )
        except IntegrityError:
            # Two first heartbeats raced; the other one created the row.
            return self.select_for_update().get(id=worker_id)
        events.record([events.worker_event("worker.started", worker, now)])
        return worker

    def deregister(self, worker_id: str) -> bool:
        """Remove a worker that shut down (§3.4); jobs it still holds are recovered now."""
        with transaction.atomic():
            worker = self.select_for_update().filter(id=worker_id).first()
            if worker is None:
                return False
            now = db_now()
            _recover_jobs([worker_id], now, "worker deregistered while holding the job")
            worker.delete()
            events.record([events.worker_event("worker.stopped", worker, now, reason="deregistered")])
        return True

    def set_directive(self, worker_ids: Iterable[str], directive: WorkerState) -> int:
        """An operator asks workers to go quiet, terminate, or run again (next BEAT)."""
        return self.filter(id__in=list(worker_ids)).update(
            directive=WorkerState(directive), directive_set_at=TxNow()
        )

    def reap_dead(self, limit: int) -> int:
        """Declare workers silent past the heartbeat timeout dead; recover their jobs at once.

        ojs-worker-protocol §10.2: each job goes back to ``available`` (or is
        discarded when its attempts are exhausted; the attempt was charged at
        claim) with a ``worker_death`` error, and the worker row is removed.
        """
        timeout = dt.timedelta(seconds=ojs_settings.HEARTBEAT_TIMEOUT)
        with transaction.atomic():
            dead = list(
                self.select_for_update(skip_locked=True)
                .filter(last_heartbeat_at__lt=TxNow() - Value(timeout))
                .order_by("last_heartbeat_at")[:limit]
            )
            if not dead:
                return 0
            now = db_now()
            recovered = _recover_jobs(
                [w.id for w in dead],
                now,
                f"worker missed heartbeats for over {ojs_settings.HEARTBEAT_TIMEOUT}s and was declared dead",
            )
            self.filter(id__in=[w.id for w in dead]).delete()
            events.record(events.worker_event("worker.stopped", w, now, reason="dead") for w in dead)
        return recovered


def _recover_jobs(worker_ids: list[str], now: dt.datetime, message: str) -> int:
    """Return the active jobs these workers hold to the queue (``worker_death``)."""
    from ..models import Job

    # The reservation owner covers the last reported active_job_ids and any
    # job claimed after that heartbeat.
    jobs = list(Job.objects.select_for_update().filter(state=JobState.ACTIVE, worker_id__in=worker_ids))
    failure = Failure(type="worker_death", message=message, retryable=True)
    return settle_rows(Job.objects, jobs, lambda job: failure, now, Settle.REQUEUE)


def _classify(
    job_model: Any, worker_id: str, ids: list[str]
) -> tuple[dict[str, int], list[str], list[str], list[WorkerState]]:
    """Split reported job ids: held by this worker, cancelled, or lost."""
    held: dict[str, int] = {}
    cancelled: list[str] = []
    lost: list[str] = []
    hints: list[WorkerState] = []
    if not ids:
        return held, cancelled, lost, hints
    rows = job_model.objects.filter(id__in=ids).values_list("seq", "id", "state", "worker_id", "meta")
    found = set()
    for seq, job_id, state, owner, meta in rows:
        key = str(job_id)
        found.add(key)
        if state == JobState.ACTIVE and owner in (None, worker_id):
            held[key] = seq
            hint = (meta or {}).get("test_directive")
            if isinstance(hint, str) and hint in WorkerState._value2member_map_:
                hints.append(WorkerState(hint))
        elif state == JobState.CANCELLED:
            cancelled.append(key)
        else:
            lost.append(key)
    lost.extend(job_id for job_id in ids if job_id not in found)
    return held, cancelled, lost, hints



