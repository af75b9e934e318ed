"""The PostgreSQL engine: the stepwise engine's questions, answered by one statement each where it can.

Each method runs its statement or declines (``None``/``False``), and the
operation then takes its steps, in the same transaction or afresh; which
cases each statement decides is said in its own module. ``core/engine.py``
lists every method beside its stepwise twin and decides when this engine runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from django.db import connection, transaction

from ...conf import ojs_settings
from ...models import Job
from ...protocol.envelope import JobSpec
from ...protocol.states import Move
from ..fairness import Turns
from ..queue_settings import register_queues, settings_of
from ..refusal import refusal
from ..stepwise import StepwiseEngine
from ..types import ClaimOutcome, Lease, Settlement, TurnOutcome
from . import claim, events, fair_claim, push, settle, turn


def one_statement(queue: str) -> bool:
    """Can ``pg/claim.py``'s statement claim from ``queue``? Not when a rate or concurrency limit must
    decide row by row (those claims take the steps), nor for a fair queue (``pg/fair_claim.py``'s)."""
    configured = settings_of(queue)
    return configured.limit is None and configured.fairness_key is None


class PostgresEngine(StepwiseEngine):
    name = "postgres"

    def push_plain(self, specs: Sequence[JobSpec], chosen_ids: list[Any]) -> list[Job] | None:
        """Plain jobs (``push.all_plain``) in one statement.

        Outside a transaction that statement is the whole PUSH, atomic on
        its own: no BEGIN, no COMMIT. Inside the caller's transaction, when
        the caller chose an id (``chosen_ids``), a savepoint keeps that
        transaction usable if the id is taken. ``enqueue``'s own ids cannot
        be, so the commonest case, a view enqueueing a job in its
        transaction, is one round trip, not three (SAVEPOINT, the statement,
        RELEASE). A taken id fails the statement; the operation reports it.
        """
        if not push.all_plain(specs):
            return None
        # No clock read: the statement sets created_at and enqueued_at itself.
        with transaction.atomic() if chosen_ids and connection.in_atomic_block else nullcontext():
            if chosen_ids and Job.objects.filter(id__in=chosen_ids).exists():
                # Taken, perhaps by a finished job: the unique index on id covers each partition
                # alone (core/partitions.py). The steps report the duplicate. Two PUSHes of one
                # new id still meet in the live partition's index.
                return None
            register_queues({spec.queue for spec in specs})
            return push.insert(specs)

    def claim_queue(
        self,
        queue: str,
        count: int,
        worker_id: str | None,
        visibility_timeout: dt.timedelta | None,
        *,
        hold: bool,
        types: Sequence[str] | None = None,
        turns: Turns | None = None,
    ) -> ClaimOutcome | None:
        configured = settings_of(queue)
        if configured.limit is None and configured.fairness_key is not None:
            return fair_claim.claim(queue, count, worker_id, visibility_timeout, configured,
                                    hold=hold, types=types, turns=turns)
        if not one_statement(queue):
            return None
        return claim.claim(queue, count, worker_id, visibility_timeout, hold=hold, types=types)

    def turn(
        self,
        worker_id: str,
        settlements: Sequence[Settlement],
        queues: Sequence[str],
        count: int,
        types: Sequence[str] | None = None,
    ) -> TurnOutcome | None:
        if not turn.applies(worker_id, settlements):
            return None
        # The claim too when its queue is one statement's (else the operation claims after).
        at_once = count if len(queues) == 1 and one_statement(queues[0]) else 0
        return turn.turn(worker_id, settlements, queues[0], at_once, types)

    def ack_alone(self, job_id: Any, result: Any, lease: Lease) -> Job | None:
        return settle.ack(job_id, result, lease, steps=False)

    def ack(self, job_id: Any, result: Any, lease: Lease) -> Job | None:
        job = settle.ack(job_id, result, lease)
        if job is None:
            raise refusal(Job.objects.filter(id=job_id).first(), job_id, Move.ACK)
        return job

    def lock_settled(self, job_ids: Sequence[str], *, holding: str | None) -> tuple[bool, list[tuple]] | None:
        return settle.lock_settled(job_ids, holding=holding)

    def complete_rows(
        self, seqs: Sequence[int], results: Sequence[Any], now: dt.datetime, labels: list[tuple[str, str]]
    ) -> bool:
        settle.complete_rows(seqs, results, now, labels)
        return True

    def record_job_events(
        self, kind: str, seqs: list[int], time: dt.datetime, data: dict[str, Any], *, with_duration: bool,
        live: bool = False,
    ) -> bool:
        if not ojs_settings.EVENTS:
            return False  # nothing to store; the receivers get them built in Python
        events.insert_from_rows(kind, seqs, time, data, with_duration=with_duration, live=live)
        return True

    def queues_with_work(self, names: list[str], types: Sequence[str] | None = None) -> list[str]:
        return claim.queues_with_work(names, types)
