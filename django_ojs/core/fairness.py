"""Fair queues at FETCH: round-robin across the values of a queue's fairness key.

A fair queue (its configuration names a ``fairness_key``, ``protocol/fairness.py``)
is claimed in steps on every engine, like a limited queue:

1. ``waiting_keys``: the values with available jobs, read from the partial
   index ``ojs_job_fair`` (queue, fair_key, priority, seq) by a skip scan --
   one index probe per value, whatever the number of jobs behind each;
2. ``turn_order``: those values, the one whose last claim is oldest first
   (``FairTurn.turn``, the queue's claims numbered; a value never claimed
   first of all), then by value;
3. ``candidates``: the claim's jobs shared out round-robin in that order
   (``protocol.fairness.round_robin``), each value's share its next jobs by
   priority, then enqueue order, locked ``FOR UPDATE SKIP LOCKED``: one
   probe per value served; a share a value cannot fill passes to the others;
4. ``Turns``: the values served and the claim's time, written at the end of
   the claim's transaction in (queue, value) order -- the only rows a fair
   claim waits for, always in one order, after every job row it locks.

So one tenant's million jobs cannot starve another's ten: each claim serves
the values in turn, and a claim's cost grows with the number of values
waiting, not with the jobs. An unfair queue never comes here.

The key is read at PUSH; changing a queue's key rewrites its unfinished
jobs' values (``rekey``), and ``mend`` gives one to a job pushed by a
process whose cached configuration (``QUEUE_CONFIG_TTL``) predated the change.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import defaultdict
from typing import Any

from django.db import connection
from django.db.models import QuerySet, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Left
from django.utils import timezone

from ..conf import ojs_settings
from ..models import FairTurn, Job
from ..protocol import fairness
from ..protocol.states import TERMINAL, JobState

# Jobs given their key per claim while a configuration change is fresh.
MEND_BATCH = 1_000
# How long after a change a process may still push with the old configuration: its
# cache's lifetime, twice over, and time for a PUSH begun before it to commit.
MEND_MARGIN = dt.timedelta(seconds=30)
UNFINISHED = sorted(state.value for state in JobState if state not in TERMINAL)


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


def turn_order(queue: str, keys: list[str]) -> list[str]:
    """``keys`` in turn order: the oldest last claim first, a value never claimed before all; ties by value."""
    last = dict(FairTurn.objects.filter(queue=queue, fair_key__in=keys).values_list("fair_key", "turn"))
    return sorted(keys, key=lambda key: (last.get(key, 0), key))


def candidates(queue: str, available: QuerySet[Job], wanted: int) -> list[Job]:
    """Up to ``wanted`` jobs of ``available`` (the queue's claimable rows, already narrowed), locked,
    shared round-robin across the values waiting; in turn order, one job of each value a round."""
    pending = turn_order(queue, waiting_keys(queue))
    taken: dict[str, list[Job]] = {}
    while pending and wanted > 0:
        shares = fairness.round_robin(pending, wanted)
        full = []
        for key, share in shares:
            # A range of one value, not "= key", and the index's own order: the planner then finds no
            # cheaper way than ojs_job_fair, even with statistics that call the value common (with "=",
            # it walked ojs_job_available filtering on the value, past every other value's jobs).
            rows = list(
                available.filter(fair_key__gte=key, fair_key__lte=key)
                .exclude(seq__in=[job.seq for job in taken.get(key, [])])
                .order_by("fair_key", "-priority", "seq")[:share]
            )
            taken.setdefault(key, []).extend(rows)
            wanted -= len(rows)
            if len(rows) == share:
                full.append(key)
        # A value that could not fill its share has nothing more to give this claim (none left, or
        # none of the worker's types, or all locked); the values not reached yet, then the others,
        # go on round where the rotation stopped: fewest taken first.
        unreached = pending[len(shares):]
        pending = sorted(full + unreached, key=lambda key: len(taken.get(key, [])))
    rounds = max((len(rows) for rows in taken.values()), default=0)
    return [rows[i] for i in range(rounds) for rows in taken.values() if i < len(rows)]


class Turns:
    """The values a claim served, per queue, in the order served; written once, at the end of the claim."""

    def __init__(self) -> None:
        self.served: dict[str, dict[str, None]] = defaultdict(dict)
        self.at: dt.datetime | None = None

    def add(self, jobs: list[Job], now: dt.datetime) -> None:
        for job in jobs:
            if job.fair_key is not None:
                self.served[job.queue].pop(job.fair_key, None)  # served again: last
                self.served[job.queue][job.fair_key] = None
                self.at = now

    def write(self) -> None:
        """Number the served values' turns after the queue's last, in the order served; upsert them in
        (queue, value) order, so concurrent fair claims wait for each other's rows in one order and
        cannot deadlock. Two claims at once may number alike: a tie, broken by value."""
        if self.at is None:
            return
        rows = []
        for queue in sorted(self.served):
            last = FairTurn.objects.filter(queue=queue).order_by("-turn").values_list("turn", flat=True).first() or 0
            rows += [FairTurn(queue=queue, fair_key=key, turn=last + position, last_claimed_at=self.at)
                     for position, key in enumerate(self.served[queue], start=1)]
        rows.sort(key=lambda row: (row.queue, row.fair_key))
        FairTurn.objects.bulk_create(rows, update_conflicts=True, unique_fields=["queue", "fair_key"],
                                     update_fields=["turn", "last_claimed_at"])
        self.served.clear()
        self.at = None


def key_expression(path: str) -> Any:
    """``protocol.fairness.key_of`` in SQL, for rows already stored (a string value reads the same)."""
    return Coalesce(Left(KT(fairness.lookup(path)), fairness.MAX_VALUE_LENGTH), Value(fairness.NO_VALUE))


def rekey(queue: str, path: str | None) -> int:
    """Give ``queue``'s unfinished jobs their value of ``path`` (None: no value); how many changed.

    Rows another transaction holds (a claim in flight) are skipped, never waited for:
    they are being started, and keep the value they had.
    """
    held = Job.objects.filter(queue=queue, state__in=UNFINISHED).select_for_update(skip_locked=True)
    value = key_expression(path) if path is not None else Value(None)
    return Job.objects.filter(seq__in=held.values("seq")).update(fair_key=value)


def mend(queue: str, path: str, changed_at: dt.datetime | None) -> None:
    """Give ``queue``'s key to unfinished jobs pushed without one, by a process whose cached configuration
    predated the change: a bounded batch per claim while the change is fresh, then all that are left,
    once per process and change. Locked rows are skipped, never waited for."""
    if changed_at is None:
        return
    fresh = timezone.now() - changed_at <= dt.timedelta(seconds=2 * ojs_settings.QUEUE_CONFIG_TTL) + MEND_MARGIN
    with _mended_lock:
        if not fresh and _mended.get(queue) == changed_at:
            return
    unkeyed = Job.objects.filter(queue=queue, fair_key__isnull=True, state__in=UNFINISHED)
    while True:
        seqs = list(unkeyed.select_for_update(skip_locked=True).values_list("seq", flat=True)[:MEND_BATCH])
        if seqs:
            Job.objects.filter(seq__in=seqs).update(fair_key=key_expression(path))
        if fresh or len(seqs) < MEND_BATCH:
            break
    if not fresh:
        with _mended_lock:
            _mended[queue] = changed_at


# Per queue, the configuration change whose stragglers this process has mended all of.
_mended: dict[str, dt.datetime] = {}
_mended_lock = threading.Lock()
