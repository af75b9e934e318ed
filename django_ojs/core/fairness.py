"""Fair queues at FETCH: round-robin across the values of a queue's fairness key.

A fair queue (its configuration names a ``fairness_key``, ``protocol/fairness.py``)
is claimed in these steps, like a limited queue:

1. ``waiting_keys``: the values with available jobs, read from the partial
   index ``ojs_job_fair`` (queue, fair_key, priority, seq) by a skip scan --
   one index probe per value, whatever the number of jobs behind each;
2. ``turn_order``: those values, the one whose turn is oldest first
   (``FairTurn.turn``, renumbered after the queue's highest when a value's
   round ends; a value never claimed first of all), then by value; each with
   its weight (the queue's ``fairness_weights``) and the claims it has used
   in its current round (``FairTurn.used``);
3. ``candidates``: the claim's jobs shared out in weighted round-robin in that
   order (``protocol.fairness.schedule``: round by round, a value of weight
   w taking up to w in a round), each value's share its next jobs by
   priority, then enqueue order, locked ``FOR UPDATE SKIP LOCKED``: one
   probe per value served; a share a value cannot fill passes to the others;
4. ``Turns``: the values served counted into their rounds
   (``protocol.fairness.advance``) at the end of the claim's transaction, in
   (queue, value) order -- the only rows a fair claim waits for, always in
   one order, after every job row it locks.

On PostgreSQL, a claim that is a transaction of its own does all four in one
statement (``core/pg/fair_claim.py``); these steps are its stepwise twin.

So one tenant's million jobs cannot starve another's ten: each claim serves
the values in turn, and a claim's cost grows with the number of values
waiting, not with the jobs. An unfair queue never comes here.

The key is read at PUSH; changing a queue's key rewrites its waiting
jobs' values (``rekey``), and ``mend`` gives the right one to a job pushed by a
process whose cached configuration (``QUEUE_CONFIG_TTL``) predated the change.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter, defaultdict
from typing import Any

from django.db import connection
from django.db.models import F, QuerySet, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Left
from django.utils import timezone

from ..conf import ojs_settings
from ..models import FairTurn, Job
from ..protocol import fairness
from ..protocol.states import WAITING, JobState
from .queue_settings import settings_of
from .row_movement import retried_in_savepoint

# Jobs given their key per claim while a configuration change is fresh.
MEND_BATCH = 1_000
# How long after a change a process may still push with the old configuration: its
# cache's lifetime, twice over, and time for a PUSH begun before it to commit.
MEND_MARGIN = dt.timedelta(seconds=30)


def waiting_keys(queue: str) -> list[str]:
    """The values of ``queue``'s fairness key with available jobs, in value order: a skip scan of ``ojs_job_fair``."""
    table = connection.ops.quote_name(Job._meta.db_table)
    # The state as a literal and the key not null: the partial index is provably usable.
    head = f"SELECT fair_key FROM {table} WHERE queue = %s AND state = '{JobState.AVAILABLE.value}'"
    sql = (
        f"WITH RECURSIVE keys(k) AS (SELECT ({head} AND fair_key IS NOT NULL ORDER BY fair_key LIMIT 1)"
        f" UNION ALL SELECT ({head} AND fair_key IS NOT NULL AND fair_key > keys.k ORDER BY fair_key LIMIT 1)"
        " FROM keys WHERE keys.k IS NOT NULL) SELECT k FROM keys WHERE k IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [queue, queue])
        return [row[0] for row in cursor.fetchall()]


def turn_order(queue: str, keys: list[str]) -> list[fairness.Turn]:
    """``keys`` in turn order, with their weights and the claims used in their current round: the
    oldest turn first, a value never claimed before all; ties by value."""
    configured = settings_of(queue)
    rows = {key: (turn, used) for key, turn, used in
            FairTurn.objects.filter(queue=queue, fair_key__in=keys).values_list("fair_key", "turn", "used")}
    ordered = sorted(keys, key=lambda key: (rows.get(key, (0, 0))[0], key))
    return [fairness.Turn(key, configured.weight_of(key), rows.get(key, (0, 0))[1]) for key in ordered]


def candidates(queue: str, available: QuerySet[Job], wanted: int) -> list[Job]:
    """Up to ``wanted`` jobs of ``available`` (the queue's claimable rows, already narrowed), locked,
    shared across the values waiting in weighted round-robin (``protocol.fairness.schedule``), in
    that order."""
    pending = turn_order(queue, waiting_keys(queue))
    taken: dict[str, list[Job]] = {}
    order: list[Job] = []
    while pending and wanted > 0:
        slots = fairness.schedule(pending, wanted, {key: len(rows) for key, rows in taken.items()})
        shares = Counter(slots)
        short = set()
        fetched: dict[str, list[Job]] = {}
        for key, share in shares.items():
            # A range of one value, not "= key", and the index's own order: the planner then finds no
            # cheaper way than ojs_job_fair, even with statistics that call the value common (with "=",
            # it walked ojs_job_available filtering on the value, past every other value's jobs).
            rows = list(
                available.filter(fair_key__gte=key, fair_key__lte=key)
                .exclude(seq__in=[job.seq for job in taken.get(key, [])])
                .order_by("fair_key", "-priority", "seq")[:share]
            )
            fetched[key] = rows
            wanted -= len(rows)
            if len(rows) < share:
                short.add(key)
        # The jobs in slot order: each value's next job fills its next slot, while it has one.
        for key in slots:
            if fetched[key]:
                job = fetched[key].pop(0)
                taken.setdefault(key, []).append(job)
                order.append(job)
        # A value that could not fill its share has nothing more to give this claim (none left, or
        # none of the worker's types, or all locked); the others go on round where they stopped.
        pending = [turn for turn in pending if turn.key not in short]
    return order


class Turns:
    """The jobs a claim took per queue and value; the values' turns written once, at the end of the claim."""

    def __init__(self) -> None:
        self.served: dict[str, Counter[str]] = defaultdict(Counter)
        self.at: dt.datetime | None = None

    def add(self, jobs: list[Job], now: dt.datetime) -> None:
        for job in jobs:
            if job.fair_key is not None:
                self.served[job.queue][job.fair_key] += 1
                self.at = now

    def write(self) -> None:
        """Count each served value's claims into its round (``protocol.fairness.advance``); a value whose
        round ended goes to the back: its turn numbered after the queue's last, in the order the rounds
        ended. Upserted in (queue, value) order, one pass, so concurrent fair claims wait for each other's
        rows in one order and cannot deadlock. Two claims at once may number alike (a tie, broken by value),
        and the later may count from the row as it was before the other: a value's round one claim longer.
        (The one statement, ``pg/fair_claim.py``, counts on from the row as locked.)"""
        if self.at is None:
            return
        upserts: list[FairTurn] = []
        for queue in sorted(self.served):
            got = self.served[queue]
            rows = {row.fair_key: row for row in FairTurn.objects.filter(queue=queue, fair_key__in=list(got))}
            last = FairTurn.objects.filter(queue=queue).order_by("-turn").values_list("turn", flat=True).first() or 0
            configured = settings_of(queue)
            turn = {key: rows[key].turn if key in rows else 0 for key in got}
            turns = [fairness.Turn(key, configured.weight_of(key), rows[key].used if key in rows else 0)
                     for key in sorted(got, key=lambda key: (turn[key], key))]
            used, ended = fairness.advance(turns, got)
            turn.update({key: last + position for position, key in enumerate(ended, start=1)})
            upserts += [FairTurn(queue=queue, fair_key=key, turn=turn[key], used=used[key], last_claimed_at=self.at)
                        for key in sorted(got)]
        FairTurn.objects.bulk_create(upserts, update_conflicts=True, unique_fields=["queue", "fair_key"],
                                     update_fields=["turn", "used", "last_claimed_at"])
        self.served.clear()
        self.at = None


def key_expression(path: str) -> Any:
    """``protocol.fairness.key_of`` in SQL, for rows already stored (a string value reads the same)."""
    return Coalesce(Left(KT(fairness.lookup(path)), fairness.MAX_VALUE_LENGTH), Value(fairness.NO_VALUE))


def rekey(queue: str, path: str | None) -> int:
    """Give ``queue``'s waiting jobs their value of ``path`` (None: no value); how many changed.

    In the caller's transaction (the configuration's change), in batches from the newest job
    back, so the oldest, which claims take first, are locked last and briefly. Rows another
    transaction holds (a claim in flight) are skipped, never waited for: they are being
    started, and keep the value they had; so do active jobs (``_rewrite``).
    """
    value = key_expression(path) if path is not None else Value(None)
    return _rewrite(Job.objects.filter(queue=queue, state__in=WAITING), value)


def _rewrite(rows: QuerySet[Job], value: Any) -> int:
    """Set ``fair_key`` to ``value`` on ``rows`` (waiting jobs), newest first, ``MEND_BATCH`` a
    statement, each in a savepoint; how many changed.

    Only waiting jobs: an active one has been claimed (its value served its turn), and an ACK
    or a failure may move its row to a history partition at any moment; a statement that then
    locks it fails (``core/row_movement.py``). A waiting job claimed and finished while a batch
    runs fails it the same way: that batch alone is run again, and finds the row gone."""
    changed = 0
    before: int | None = None

    def one_batch() -> list[int]:
        batch = rows if before is None else rows.filter(seq__lt=before)
        seqs = list(batch.select_for_update(skip_locked=True).order_by("-seq")
                    .values_list("seq", flat=True)[:MEND_BATCH])
        if seqs:
            Job.objects.filter(seq__in=seqs).update(fair_key=value)
        return seqs

    while True:
        seqs = retried_in_savepoint(one_batch)
        changed += len(seqs)
        if len(seqs) < MEND_BATCH:
            return changed
        before = seqs[-1]


def mend(queue: str, path: str, changed_at: dt.datetime | None) -> None:
    """Give ``queue``'s key to waiting jobs pushed with another value by a process whose cached
    configuration predated the change: while the change is fresh, a bounded batch of those pushed
    without a value per claim (the common case: fairness turned on); then, once per process and
    change, every waiting job whose value is not its value of the key (a key changed to another,
    a job retried after the change). Locked rows are skipped, never waited for."""
    if changed_at is None or mended(queue, changed_at):
        return
    waiting = Job.objects.filter(queue=queue, state__in=WAITING)
    if _fresh(changed_at):
        # Newest first, as ``_rewrite``: claims take the oldest, whose rows may be claimed and
        # finished (moved) while this statement locks its way towards them.
        locked = waiting.filter(fair_key__isnull=True).select_for_update(skip_locked=True).order_by("-seq")

        def one_batch() -> None:
            seqs = list(locked.values_list("seq", flat=True)[:MEND_BATCH])
            if seqs:
                Job.objects.filter(seq__in=seqs).update(fair_key=key_expression(path))

        retried_in_savepoint(one_batch)
        return
    expected = key_expression(path)
    _rewrite(waiting.alias(expected=expected).exclude(fair_key=F("expected")), expected)
    with _mended_lock:
        _mended[queue] = changed_at


def mended(queue: str, changed_at: dt.datetime | None) -> bool:
    """Is there nothing for ``mend`` to do in ``queue``: no change, or one past its freshness whose
    stragglers this process has mended all of?"""
    if changed_at is None:
        return True
    with _mended_lock:
        return not _fresh(changed_at) and _mended.get(queue) == changed_at


def _fresh(changed_at: dt.datetime) -> bool:
    return timezone.now() - changed_at <= dt.timedelta(seconds=2 * ojs_settings.QUEUE_CONFIG_TTL) + MEND_MARGIN


# Per queue, the configuration change whose stragglers this process has mended all of.
_mended: dict[str, dt.datetime] = {}
_mended_lock = threading.Lock()
