"""A worker's turn: write its finished attempts, then claim for its free slots.

The in-process worker's, and an HTTP worker's batch ACK that carries its next
FETCH (``api/workers.BatchAckView``).

One transaction, one commit. Lock order (DESIGN invariant 11): the worker's
row, then the batch's job rows in ``seq`` order (``settle_many``), then new
jobs with SKIP LOCKED. The worker's row is held by the first statement that
locks: the batch's lock, or the claim when there is no batch (no statement
of its own).

Outside a caller's transaction the engine may do the common turn -- a
batch of completions, a queue without limits -- in one statement
(``Engine.turn``); a claim with no batch is FETCH's.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

from django.db import DatabaseError, connection, transaction

from ..models import Job
from . import maintenance_mode
from .claim import claim, fetch
from .engine import current as current_engine
from .row_movement import retried_on_row_movement
from .settle import settle_many
from .types import LimitReport, Settlement, Verdict

logger = logging.getLogger("django_ojs.worker")  # the in-process worker's turn


@retried_on_row_movement
def settle_and_fetch(
    worker_id: str | None,
    settlements: Sequence[Settlement],
    queues: Sequence[str],
    count: int,
    limit_report: LimitReport | None = None,
    types: Sequence[str] | None = None,
    visibility_timeout: dt.timedelta | None = None,
) -> tuple[list[Verdict], list[Job]]:
    """Write this worker's finished attempts and claim up to ``count`` jobs (of ``types`` only, when
    given: the types it has handlers for); a verdict per attempt, and the jobs.

    ``worker_id`` None: an HTTP worker that names none, as FETCH allows (each
    attempt's lease says what it holds); ``visibility_timeout``: the claimed
    jobs' reservation, as FETCH's. In maintenance mode the attempts are
    written and nothing is claimed.
    """
    if not maintenance_mode.handing_out():
        count = 0
    if not connection.in_atomic_block:
        if not settlements:
            return [], fetch(queues, count=count, worker_id=worker_id, visibility_timeout=visibility_timeout,
                             limit_report=limit_report, types=types)
        # The one-statement turn claims with each job's own reservation, for a worker it can hold.
        if worker_id is not None and visibility_timeout is None:
            turn = current_engine().turn(worker_id, settlements, queues, count, types)
            if turn is not None and turn.settled:
                jobs = turn.jobs
                if count and not turn.claimed:
                    jobs = _claim_after_written_batch(queues, count, worker_id, limit_report, types)
                return [Verdict.COMPLETED] * len(settlements), jobs
    with transaction.atomic():
        holding = worker_id if count > 0 else None
        verdicts = settle_many(settlements, holding=holding)
        # The batch's lock held the worker's row first (lock order); a claim without a batch holds it itself.
        held = holding is not None and bool(settlements)
        jobs = claim(queues, count, worker_id, visibility_timeout, limit_report,
                     hold=worker_id is not None and not held, types=types) if count > 0 else []
    return verdicts, jobs


def _claim_after_written_batch(
    queues: Sequence[str], count: int, worker_id: str, limit_report: LimitReport | None, types: Sequence[str] | None
) -> list[Job]:
    """The claim that follows a batch its own statement wrote and committed.

    A database error here must not reach the worker as the turn's: it
    would write the batch again next turn, and be refused, as if the jobs
    had been taken away. The batch stands; nothing is claimed; the next
    turn claims (and meets the outage, if it is one).
    """
    try:
        return fetch(queues, count=count, worker_id=worker_id, limit_report=limit_report, types=types)
    except DatabaseError as exc:
        logger.warning("claim after a written batch failed (%s); the next turn claims", exc)
        return []
