"""The claim of one fair queue in one statement.

Stepwise twin: ``core.claim``'s ``claim_from`` with ``core/fairness.py``: list the values
waiting, read their turns, take each served value's share, count the turns -- about ten
round trips for two values. One statement does them all:

1. ``claimant`` holds the worker's row ``FOR KEY SHARE`` and reads whether it was
   declared dead (``pg/claim.py``'s);
2. ``waiting``: the values with available jobs, a skip scan of ``ojs_job_fair``
   (a recursive CTE: one index probe per value, whatever the jobs behind it);
3. ``ranked``: those values in turn order (``FairTurn.turn``, then the value; a value
   never claimed first), each with its weight (the queue's ``fairness_weights``) and
   what is left of its current round -- only the first ``count`` of them: each value
   ahead takes at least one job a round, so no value further back can be reached;
4. ``slots``: the claim's jobs shared out as ``protocol.fairness.schedule`` does --
   round by round, in a round the values in turn order, each taking what is left of its
   weight; ``shares``: how many each value is to give;
5. ``candidates``: each value's share, its next jobs by priority then enqueue order,
   locked ``FOR UPDATE SKIP LOCKED`` from ``ojs_job_fair`` (a lateral probe per value);
6. ``verdict``: ``plain`` when every candidate is plain (no rate key, not expired, as
   in ``pg/claim.py``) and the shares were filled -- or could not be, by any value;
7. ``claimed`` activates them exactly as ``pg/claim.py``'s ``claimed`` does (state,
   attempt charged, started, the reservation, the deadline) and ``logged`` records
   their ``job.started`` events;
8. ``counted`` then ``turned`` count each served value's jobs into its round
   (``protocol.fairness.advance``): one upsert in value order, after every job row,
   whose update counts on from the row as it is once locked.

While a change of the queue's key is fresh, the claim first gives the jobs pushed by
processes that had not yet seen it their value (``core.fairness.mend``), in steps.

Anything else is left to the stepwise path (nothing written, nothing claimed): a dead
claimant; a candidate with a rate key or past its ``expires_at``; a value that could
not fill its share while another might have given more (the stepwise claim passes the
share on). ``turns``: a claim of several queues (``core.claim.claim``) writes every
fair queue's turns at its end, in one order, so the statement leaves them to it.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Sequence

from django.db import transaction

from ...conf import ojs_settings
from ...models import FairTurn, Job, Queue
from ...observe import signals
from ...protocol.states import JobState
from ..fairness import Turns, mend, mended
from ..queue_settings import QueueSettings
from ..types import ClaimOutcome
from . import claim as plain_claim
from . import events, prepared
from .rows import raw_loaded


def claim(
    queue: str,
    count: int,
    worker_id: str | None,
    visibility_timeout: dt.timedelta | None,
    configured: QueueSettings,
    *,
    hold: bool,
    types: Sequence[str] | None = None,
    turns: Turns | None = None,
) -> ClaimOutcome:
    """Claim up to ``count`` jobs of the fair ``queue`` in weighted round-robin, in claim order;
    ``hold``: lock the worker's row first; ``types``: only jobs of these; ``turns``: gather the
    values served there (written by the caller) instead of writing them."""
    if configured.fairness_key is not None and not mended(queue, configured.changed_at):
        # While a change of the key is fresh, jobs pushed under the old one get theirs first: a few
        # statements of its own, as the stepwise claim does (core/fairness.py).
        with transaction.atomic(savepoint=False):
            mend(queue, configured.fairness_key, configured.changed_at)
    listening = signals.wanted()
    sql = _statement(hold and worker_id is not None, listening, ojs_settings.EVENTS, types is not None,
                     turns is None)
    params = {
        **plain_claim.claim_params(queue, count, worker_id, visibility_timeout, types),
        "weights": json.dumps(dict(configured.fairness_weights)),
        "default_weight": configured.fairness_default_weight,
    }
    rows = raw_loaded(Job.objects, sql, params)
    outcome = ClaimOutcome([], rows[0].claim_alive, rows[0].claim_plain)
    slot = {job.seq: job.fair_slot for job in rows}
    for job in rows:
        del job.claim_alive, job.claim_plain, job.fair_slot
    outcome.jobs = sorted(plain_claim.claimed_jobs(rows, listening), key=lambda job: slot[job.seq])
    started = outcome.jobs[0].started_at if outcome.jobs else None
    if turns is not None and started is not None:
        turns.add(outcome.jobs, started)
    return outcome


def skip_scan(table: str) -> str:
    """``waiting(k)``: the values of ``%(queue)s``'s key with available jobs, one index probe each (and a NULL last)."""
    # The state as a literal and the key not null: the partial index is provably usable.
    head = (f"SELECT fair_key FROM {table} WHERE queue = %(queue)s AND state = '{JobState.AVAILABLE.value}'"
            " AND fair_key IS NOT NULL")
    return (
        f"waiting(k) AS (SELECT ({head} ORDER BY fair_key LIMIT 1)"
        f" UNION ALL SELECT ({head} AND fair_key > w.k ORDER BY fair_key LIMIT 1) FROM waiting w WHERE w.k IS NOT NULL)"
    )


@functools.lru_cache(maxsize=32)
def _statement(hold: bool, listening: bool, events_on: bool, typed: bool, writes_turns: bool) -> str:
    """The fair claim's text for these cases (``events_on``: ``OJS["EVENTS"]``, which the logged CTE
    reads; ``typed``: only the worker's types; ``writes_turns``: the statement counts the turns), built once."""
    job_table = Job._meta.db_table
    turn_table = FairTurn._meta.db_table
    dead = "EXISTS (SELECT 1 FROM claimant WHERE NOT alive)"
    paused = f"EXISTS (SELECT 1 FROM {Queue._meta.db_table} WHERE name = %(queue)s AND paused)"
    of_types = f" AND {plain_claim.of_types_filter('type', '%(types)s')}" if typed else ""
    claimant = plain_claim.claimant_cte() if hold else "claimant AS (SELECT true AS alive WHERE false)"
    logged = events.logged_cte("claimed j", kind="%(kind)s", time="CURRENT_TIMESTAMP", data="%(data)s",
                               listening=listening)
    sql = (
        f"WITH RECURSIVE {claimant}, {skip_scan(job_table)}, "
        "ranked AS MATERIALIZED (SELECT fair_key, weight, used, weight - least(used, weight - 1) AS left_in_round,"
        " rank FROM (SELECT w.k AS fair_key, coalesce(t.used, 0) AS used,"
        " coalesce((%(weights)s::jsonb ->> w.k)::int, %(default_weight)s) AS weight,"
        " row_number() OVER (ORDER BY coalesce(t.turn, 0), w.k) - 1 AS rank"
        f" FROM waiting w LEFT JOIN {turn_table} t ON t.queue = %(queue)s AND t.fair_key = w.k"
        " WHERE w.k IS NOT NULL) v WHERE rank < %(count)s), "
        # protocol.fairness.schedule: a value's index-th job is in round 0 while its round has room, then
        # a round per weight; the claim's slots by round, then turn order, then index.
        "slots AS MATERIALIZED (SELECT fair_key, index, row_number() OVER (ORDER BY round, rank, index) AS slot"
        " FROM (SELECT r.fair_key, r.rank, i AS index, CASE WHEN i < r.left_in_round THEN 0"
        " ELSE 1 + (i - r.left_in_round) / r.weight END AS round"
        " FROM ranked r CROSS JOIN generate_series(0, %(count)s - 1) AS i) s ORDER BY round, rank, index"
        " LIMIT %(count)s), "
        "shares AS MATERIALIZED (SELECT fair_key, count(*) AS share FROM slots GROUP BY fair_key), "
        "candidates AS MATERIALIZED (SELECT c.seq, c.rate_key, c.expires_at, c.priority, s.fair_key"
        " FROM shares s CROSS JOIN LATERAL ("
        f" SELECT seq, rate_key, expires_at, priority FROM {job_table}"
        # The state as a literal, the value as a range and the index's own order: ojs_job_fair, as the
        # stepwise probe (core/fairness.candidates says why not "= value").
        f" WHERE state = '{JobState.AVAILABLE.value}' AND queue = %(queue)s{of_types}"
        " AND fair_key >= s.fair_key AND fair_key <= s.fair_key"
        f" AND NOT {paused} AND NOT {dead}"
        " ORDER BY fair_key, priority DESC, seq LIMIT s.share FOR UPDATE SKIP LOCKED) c), "
        "got AS (SELECT s.fair_key, s.share, count(c.seq) AS got FROM shares s"
        " LEFT JOIN candidates c ON c.fair_key = s.fair_key GROUP BY s.fair_key, s.share), "
        "verdict AS (SELECT"
        " coalesce(bool_and(rate_key IS NULL AND (expires_at IS NULL OR expires_at > CURRENT_TIMESTAMP)), true)"
        # Filled; or no value could have given more: every value probed (all within reach), each short.
        f" AND ((SELECT count(*) FROM candidates) = %(count)s OR {paused}"
        " OR (NOT EXISTS (SELECT 1 FROM got WHERE got >= share)"
        "  AND (SELECT count(*) FROM waiting WHERE k IS NOT NULL) = (SELECT count(*) FROM shares)))"
        " AS plain FROM candidates), "
        # The same move as an unfair claim's.
        f"{plain_claim.claimed_cte()}{logged}, "
        # Each job's slot: its value's index-th job (by priority, then enqueue order) fills that value's index-th slot.
        "placed AS (SELECT c.seq, s.slot FROM (SELECT seq, fair_key,"
        " row_number() OVER (PARTITION BY fair_key ORDER BY priority DESC, seq) - 1 AS index FROM candidates) c"
        " JOIN slots s ON s.fair_key = c.fair_key AND s.index = c.index)"
    )
    if writes_turns:
        sql += (
            # protocol.fairness.advance. Each served value's candidate turn, after the queue's last: by the
            # round its claims end, then turn order (its round ends when, with the row as locked, it fills).
            ", counted AS MATERIALIZED (SELECT g.fair_key, g.got, r.weight, least(r.used, r.weight - 1) + g.got AS total,"
            f" coalesce((SELECT max(turn) FROM {turn_table} WHERE queue = %(queue)s), 0)"
            " + row_number() OVER (ORDER BY (least(r.used, r.weight - 1) + g.got) / r.weight, r.rank) AS next_turn"
            " FROM got g JOIN ranked r ON r.fair_key = g.fair_key WHERE g.got > 0 AND (SELECT plain FROM verdict)), "
            # One pass in value order, after every job row: a new value's row inserted, a known one locked and
            # counted on as it is then (a claim committed meanwhile included), so concurrent claims wait in one order.
            f"turned AS (INSERT INTO {turn_table} AS t (queue, fair_key, turn, used, last_claimed_at)"
            " SELECT %(queue)s, fair_key, CASE WHEN got >= weight THEN next_turn ELSE 0 END, got %% weight,"
            " CURRENT_TIMESTAMP FROM counted ORDER BY fair_key"
            " ON CONFLICT (queue, fair_key) DO UPDATE SET (turn, used, last_claimed_at) = (SELECT"
            " CASE WHEN least(t.used, c.weight - 1) + c.got >= c.weight THEN c.next_turn ELSE t.turn END,"
            " (least(t.used, c.weight - 1) + c.got) %% c.weight, excluded.last_claimed_at"
            " FROM counted c WHERE c.fair_key = excluded.fair_key))"
        )
    sql += (
        f" SELECT NOT {dead} AS claim_alive, v.plain AS claim_plain, p.slot AS fair_slot,"
        f" {prepared.columns(Job, 'c')}"
    )
    rows_of = " FROM verdict v LEFT JOIN claimed c ON true LEFT JOIN placed p ON p.seq = c.seq"
    return sql + (f"{events.event_columns()}{rows_of}{events.event_join('c')}" if listening else rows_of)
