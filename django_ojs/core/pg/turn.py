"""A worker's turn in one statement: complete its finished batch, claim for its free slots.

Stepwise twin: ``core.turn.settle_and_fetch`` writes a batch and claims in one transaction:
BEGIN, lock the batch, complete it, claim, COMMIT -- five round trips, each
costing both processes a system call or two and the worker's loop its
Python (the turn was half of a worker's CPU per job). When the batch holds
nothing to decide row by row, one statement does all of it, as a
transaction of its own:

1. ``claimant`` holds the worker's row ``FOR KEY SHARE`` and reads whether it
   was declared dead (as ``pg/claim.py``);
2. ``locked`` locks the batch's rows by ``id`` alone, in ``seq`` order, as
   ``settle.lock_settled`` does, and reads whether each is a pending
   workflow step -- gated on the claimant being alive;
3. ``settlement`` is the verdict: the claimant is alive, and every finished
   attempt's row is active and still held by this worker and attempt, and
   is no workflow step;
4. ``done`` completes them, with their results, and logs ``job.completed``,
   only if the verdict says so;
5. the claim of ``pg/claim.py`` (``claiming_ctes``), gated on the same verdict.

Lock order (DESIGN invariant 11): the worker's row, then the batch in ``seq``
order, the only locks that wait; then new jobs with ``SKIP LOCKED``, which
never wait. Every gate is an uncorrelated one-time filter, evaluated before
the scan it guards, and ``locked`` is materialised, so the batch is locked
before any candidate.

Anything else writes nothing and claims nothing: a dead claimant, a refused
or a failed attempt, a workflow step. The caller then runs the turn
stepwise, in a transaction, from the start. A candidate the claim cannot
decide alone (rate key, expiry) leaves the completions written and the
claim undone: the caller claims stepwise after.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ...conf import ojs_settings
from ...models import Job, WorkflowNode
from ...observe import signals
from ...protocol.states import Move, target
from ...protocol.workflows import PENDING
from ..partitions import LIVE_SQL
from ..types import Settlement, TurnOutcome
from . import claim, events, prepared, settle
from .rows import raw_loaded


def applies(worker_id: str, settlements: Sequence[Settlement]) -> bool:
    """Can ``turn`` settle this batch: completions only, each a lease of this worker, no job twice?"""
    return (
        bool(settlements)
        and all(s.failure is None and s.lease.worker_id == worker_id and s.lease.attempt is not None
                for s in settlements)
        and len({str(s.job_id) for s in settlements}) == len(settlements)
        and not signals.wanted()  # receivers get their events from the stepwise turn
    )


def turn(
    worker_id: str, settlements: Sequence[Settlement], queue: str, count: int, types: Sequence[str] | None = None
) -> TurnOutcome:
    """Complete these attempts and claim up to ``count`` plain jobs of ``queue`` (of ``types``, when
    given), in one statement.

    For a batch ``applies`` accepts; ``queue`` without rate or concurrency
    limits (or ``count`` 0); outside any transaction (the statement is one).
    ``claimed`` is false when ``count`` is 0 or the candidates need the stepwise claim.
    """
    sql = _statement(ojs_settings.EVENTS, types is not None)
    params = {
        **claim.claim_params(queue, count, worker_id, None, types),
        "pending": PENDING,
        "ids": [str(s.job_id) for s in settlements],
        "attempts": [s.lease.attempt for s in settlements],
        "results": [settle.jsonb_param(s.result) for s in settlements],
        "completed": target(Move.ACK).value,
        "settleable": sorted(settle.ACK_SOURCES),
    }
    rows = raw_loaded(Job.objects, sql, params)
    first = rows[0]
    settled, claim_plain = bool(first.turn_settled), bool(first.claim_plain)
    if settled:
        signals.count_after_commit("job.completed", list(zip(first.done_queues or [], first.done_types or [])))
    for job in rows:
        del job.turn_settled, job.claim_plain, job.done_queues, job.done_types
    jobs = claim.claimed_jobs(rows, listening=False)
    return TurnOutcome(settled, jobs, claimed=bool(count) and claim_plain)


@functools.lru_cache(maxsize=4)
def _statement(events_on: bool, typed: bool) -> str:
    """The turn's text; it depends on nothing else (``events_on``: ``OJS["EVENTS"]``, which the
    logged CTEs read; ``typed``: the claim keeps to the worker's types), so it is built once, not on every turn."""
    job_table = Job._meta.db_table
    # The same payload complete_rows logs: duration_ms since the attempt started.
    logged_done = events.logged_cte(
        "done j", kind="'job.completed'", time="CURRENT_TIMESTAMP", data="'{}'", with_duration=True,
        listening=False, name="logged_done",
    )
    return (
        f"WITH {claim.claimant_cte()}, "
        "locked AS MATERIALIZED (SELECT j.seq, j.id, j.state, j.attempt, j.worker_id,"
        f" EXISTS (SELECT 1 FROM {WorkflowNode._meta.db_table} n WHERE n.job_seq = j.seq AND n.state = %(pending)s)"
        f" AS step FROM {job_table} j WHERE j.id = ANY(%(ids)s::uuid[]) AND j.state IN {LIVE_SQL}"
        " AND NOT EXISTS (SELECT 1 FROM claimant WHERE NOT alive) ORDER BY j.seq FOR UPDATE), "
        "settled AS (SELECT * FROM unnest(%(ids)s::uuid[], %(attempts)s::int[], %(results)s::jsonb[])"
        " AS s(id, attempt, result)), "
        "settlement AS MATERIALIZED (SELECT NOT EXISTS (SELECT 1 FROM claimant WHERE NOT alive) AS alive,"
        " (SELECT count(*) FROM locked l JOIN settled s ON s.id = l.id WHERE l.state = ANY(%(settleable)s)"
        "  AND l.attempt = s.attempt AND (l.worker_id = %(worker)s OR l.worker_id IS NULL) AND NOT l.step)"
        " = cardinality(%(ids)s::uuid[]) AS held), "
        f"done AS (UPDATE {job_table} j SET state = %(completed)s, completed_at = CURRENT_TIMESTAMP,"
        " finished_at = CURRENT_TIMESTAMP, result = s.result, error = NULL, lease_expires_at = NULL,"
        " deadline_at = NULL FROM locked l JOIN settled s ON s.id = l.id"
        f" WHERE j.seq = l.seq AND j.state IN {LIVE_SQL} AND (SELECT alive AND held FROM settlement)"
        " RETURNING j.*)"
        f"{logged_done}, "
        f"{claim.claiming_ctes(gate='(SELECT alive AND held FROM settlement)', listening=False, typed=typed)} "
        "SELECT t.alive AND t.held AS turn_settled, v.plain AS claim_plain,"
        # The completions' queues and types, for the counters (metrics): read from the rows written.
        " (SELECT array_agg(queue) FROM done) AS done_queues, (SELECT array_agg(type) FROM done) AS done_types,"
        f" {prepared.columns(Job, 'c')} FROM settlement t CROSS JOIN verdict v LEFT JOIN claimed c ON true"
    )
