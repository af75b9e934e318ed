"""FETCH: claim available jobs for a worker (ojs-core §7.2, ojs-worker-protocol §6).

One transaction. The fetching worker's row is held first (``hold_claimant``:
the reaper cannot declare it dead mid-claim, and a worker already declared
dead is revived before it claims). Then, for each requested queue in the
order given, the next jobs are locked with ``SELECT ... FOR UPDATE SKIP
LOCKED`` (priority high to low, then insertion order) from the partial
index of available jobs, and marked active in one UPDATE. A queue is
probed only while the claim is not yet full; when the first queue does not
fill it, one statement finds which of the other queues have work, so a
worker listening on a thousand mostly empty queues pays two probes, not a
thousand. Jobs whose ``expires_at`` has passed are discarded on the way,
never run. Rows whose rate or concurrency limit is reached are held back
(``core/limits.py``): they stay available and the probe goes on past them.

On PostgreSQL a queue without a rate or concurrency limit is first claimed
in one statement (``core/fastclaim.py``: hold, lock, activate, record); the
stepwise path below takes over only when that statement finds a dead
claimant, a rate-keyed or an expired candidate.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.db import DatabaseError, connection, transaction
from django.db.models import Case, Exists, F, Value, When

from ..states import JobState, Move, target
from . import events, fastclaim, fastturn, limits, prepared, queue_config
from .clock import TxNow
from .outcome import Settlement, Verdict, expire_rows
from .workers import hold_claimant

if TYPE_CHECKING:
    from ..models import Job

logger = logging.getLogger("django_ojs.worker")  # settle_and_fetch is the in-process worker's turn


class ClaimMixin:
    def fetch(
        self,
        queues: Sequence[str],
        *,
        count: int = 1,
        worker_id: str | None = None,
        visibility_timeout: dt.timedelta | None = None,
        limit_report: limits.LimitReport | None = None,
    ) -> list[Job]:
        """Claim up to ``count`` jobs; an empty list when there is no work.

        ``visibility_timeout`` overrides each job's own reservation period.
        Paused queues yield nothing. ``limit_report`` learns which rate or
        concurrency limit held jobs back, if one did.
        """
        if count < 1:
            return []
        if len(queues) == 1 and not connection.in_atomic_block and _plain_queue(queues[0]):
            # One statement is a transaction of its own: no BEGIN, no COMMIT.
            # It claims all it returns or, when it has something to leave to
            # the stepwise path, nothing at all; that path then starts afresh.
            outcome = fastclaim.claim(self, queues[0], count, worker_id, visibility_timeout, hold=bool(worker_id))
            if outcome.alive and outcome.plain:
                return outcome.jobs
        with transaction.atomic():
            return self._claim(queues, count, worker_id, visibility_timeout, limit_report, hold=bool(worker_id))

    def settle_and_fetch(
        self,
        worker_id: str,
        settlements: Sequence[Settlement],
        queues: Sequence[str],
        count: int,
        limit_report: limits.LimitReport | None = None,
    ) -> tuple[list[Verdict], list[Job]]:
        """One turn of the in-process worker: write its finished attempts, then claim for its free slots.

        One transaction, one commit. Lock order (DESIGN invariant 11): the
        worker's row, then the batch's job rows in ``seq`` order
        (``settle_many``), then new jobs with SKIP LOCKED. The worker's row
        is held by the first statement that locks: the batch's lock, or the
        claim when there is no batch (no statement of its own).

        On PostgreSQL, outside a caller's transaction, the common turn is one
        statement (``core/fastturn.py``): a batch of completions, a plain
        queue. A claim with no batch is FETCH's (one statement too).
        """
        if not connection.in_atomic_block:
            if not settlements:
                return [], self.fetch(queues, count=count, worker_id=worker_id, limit_report=limit_report)
            if fastturn.applies(worker_id, settlements):
                # The claim too when its queue is one statement's (else after, on its own).
                at_once = count if len(queues) == 1 and _plain_queue(queues[0]) else 0
                turn = fastturn.turn(self, worker_id, settlements, queues[0], at_once)
                if turn.settled:
                    jobs = turn.jobs
                    if count and (not at_once or not turn.claim_plain):
                        jobs = self._claim_after_written_batch(queues, count, worker_id, limit_report)
                    return [Verdict.COMPLETED] * len(settlements), jobs
        with transaction.atomic():
            claiming = count > 0
            verdicts = self.settle_many(settlements, holding=worker_id if claiming else None)
            held = claiming and bool(settlements)
            jobs = self._claim(queues, count, worker_id, None, limit_report, hold=not held) if claiming else []
        return verdicts, jobs

    def _claim_after_written_batch(
        self, queues: Sequence[str], count: int, worker_id: str, limit_report: limits.LimitReport | None
    ) -> list[Job]:
        """The claim that follows a batch its own statement wrote and committed.

        A database error here must not reach the worker as the turn's: it
        would write the batch again next turn, and be refused, as if the jobs
        had been taken away. The batch stands; nothing is claimed; the next
        turn claims (and meets the outage, if it is one).
        """
        try:
            return self.fetch(queues, count=count, worker_id=worker_id, limit_report=limit_report)
        except DatabaseError as exc:
            logger.warning("claim after a written batch failed (%s); the next turn claims", exc)
            return []

    def _claim(
        self,
        queues: Sequence[str],
        count: int,
        worker_id: str | None,
        visibility_timeout: dt.timedelta | None,
        limit_report: limits.LimitReport | None = None,
        *,
        hold: bool = False,
    ) -> list[Job]:
        """Claim from ``queues`` in order; ``hold``: the worker's row is not held yet (``hold_claimant``)."""
        claimed: list[Job] = []
        pending = list(dict.fromkeys(queues))
        narrowed = False
        while pending and len(claimed) < count:
            queue, wanted = pending.pop(0), count - len(claimed)
            if _plain_queue(queue):
                outcome = fastclaim.claim(self, queue, wanted, worker_id, visibility_timeout, hold=hold)
                if not outcome.alive:
                    # Revived first, then claimed like any other worker.
                    hold_claimant(worker_id)
                    outcome = fastclaim.claim(self, queue, wanted, worker_id, visibility_timeout, hold=False)
                hold = False
                claimed.extend(outcome.jobs)
                if not outcome.plain:
                    claimed.extend(self._claim_from(queue, wanted, worker_id, visibility_timeout, limit_report))
            else:
                if hold:
                    hold_claimant(worker_id)
                    hold = False
                claimed.extend(self._claim_from(queue, wanted, worker_id, visibility_timeout, limit_report))
            if len(claimed) < count and pending and not narrowed:
                pending = _queues_with_work(pending)
                narrowed = True
        if hold:
            hold_claimant(worker_id)  # no queue to claim from: a dead worker is revived all the same
        return claimed

    def _claim_from(
        self,
        queue: str,
        count: int,
        worker_id: str | None,
        visibility_timeout: dt.timedelta | None,
        limit_report: limits.LimitReport | None = None,
    ) -> list[Job]:
        from ..models import Queue

        # Uncorrelated on purpose: PostgreSQL checks it once (a one-time
        # filter) and keeps the index scan. Correlated on job.queue, it
        # became an anti-join that read and sorted the whole backlog.
        paused = Exists(Queue.objects.filter(name=queue, paused=True))
        claimed: list[Job] = []
        held = limits.Held()
        while len(claimed) < count:
            rows = list(
                held.exclude(
                    self.select_for_update(skip_locked=True)
                    .filter(state=JobState.AVAILABLE, queue=queue)
                    .exclude(paused)
                )
                .annotate(db_now=TxNow())
                .order_by("-priority", "seq")[: count - len(claimed)]
            )
            if not rows:
                break
            now = rows[0].db_now
            expired = [job for job in rows if job.expires_at is not None and job.expires_at <= now]
            if expired:
                expire_rows(self, expired, now)
            fresh = [job for job in rows if job.expires_at is None or job.expires_at > now]
            # Rate and concurrency limits (core/limits.py): rows held back stay available.
            admission = limits.admit(self, queue, fresh, now, limit_report)
            self._activate(admission.admitted, now, worker_id, visibility_timeout)
            claimed.extend(admission.admitted)
            if not expired and not held.add(admission):
                break
        return claimed

    def _activate(
        self,
        jobs: list[Job],
        now: dt.datetime,
        worker_id: str | None,
        visibility_timeout: dt.timedelta | None,
    ) -> None:
        """Mark locked jobs active in one statement, and mirror it on the objects."""
        if not jobs:
            return
        lease = Value(visibility_timeout) if visibility_timeout is not None else F("visibility_timeout")
        self.filter(seq__in=[job.seq for job in jobs]).update(
            state=target(Move.CLAIM),
            attempt=F("attempt") + 1,
            started_at=now,
            worker_id=worker_id,
            lease_expires_at=Value(now) + lease,
            deadline_at=Case(When(timeout__isnull=False, then=Value(now) + F("timeout")), default=None),
        )
        for job in jobs:
            job.state = target(Move.CLAIM)
            job.attempt += 1
            job.started_at = now
            job.worker_id = worker_id
            job.lease_expires_at = now + (visibility_timeout or job.visibility_timeout)
            job.deadline_at = now + job.timeout if job.timeout else None
        events.record_for_jobs(
            "job.started",
            [job.seq for job in jobs],
            now,
            lambda: (events.job_event("job.started", job, now, worker_id=worker_id) for job in jobs),
            data={"worker_id": worker_id},
        )


def _plain_queue(name: str) -> bool:
    """Can ``fastclaim`` claim from this queue: the fast paths may run, and no rate or concurrency limit on it."""
    return events.fast_paths_ok() and queue_config.settings_of(name).limit is None


def _queues_with_work(names: list[str]) -> list[str]:
    """The queues among ``names`` that have available jobs and are not paused, in the given order.

    One statement on PostgreSQL: an index probe per name inside the server
    (microseconds each), not a locked round trip per name. SQLite has no
    row locks and no round trips; its probes are as cheap as this check.
    """
    if connection.vendor != "postgresql":
        return names
    from ..models import Job, Queue

    sql = (
        "SELECT q.name FROM unnest(%s::text[]) WITH ORDINALITY AS q(name, position) "
        # The state as a literal: a generic plan (core/prepared.py) proves ojs_job_available usable from it.
        f"WHERE EXISTS (SELECT 1 FROM {Job._meta.db_table} j WHERE j.state = '{JobState.AVAILABLE.value}'"
        " AND j.queue = q.name) "
        f"AND NOT EXISTS (SELECT 1 FROM {Queue._meta.db_table} p WHERE p.name = q.name AND p.paused) "
        "ORDER BY q.position"
    )
    with prepared.cursor(connection) as cursor:
        cursor.execute(sql, [names])
        return [row[0] for row in cursor.fetchall()]
