"""Figures about queues and the whole store, derived from the job table, each query bounded: the one home
for the counts the admin, the HTTP API and the metrics show.

No counter row is kept (DESIGN invariant 7): counts come from the indexes
(``ojs_job_queue_state``, the partial state indexes), throughput from the
``finished_at`` of finished jobs (``ojs_job_finished``). The live jobs (waiting
or held) are counted exactly, grouped in one statement over the partial
indexes that hold only them; every query over finished jobs stops after a
fixed number of rows, so the cost of a page grows with the backlog, never
with the history: past a count's bound the planner's estimate is shown
(``≈``), past a throughput sample the window is shortened and said so. Each
statement lists its states, so a table partitioned by state reads only the
partitions they name, and none is costly enough for PostgreSQL's JIT to
compile it (a statement of hundreds of subqueries spent seconds there).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Count, Max, Min, QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.utils.dateparse import parse_datetime

from ..models import Job, Queue
from ..protocol.states import STATE_ORDER, TERMINAL, JobState
from .clock import db_now
from .counting import Tally, count_rows, local_settings, planner_estimate
from .dead_letter import dead_letter_jobs

# Per queue and finished state, counted exactly up to this many jobs.
QUEUE_COUNT_LIMIT = 1_000
# The live jobs (waiting or held) are counted exactly up to this many available ones and as many others.
LIVE_COUNT_LIMIT = 1_000_000
# The live states but available, counted from ojs_job_queue_state.
HELD_STATES = sorted(state.value for state in JobState if state not in TERMINAL and state != JobState.AVAILABLE)
FINISHED_STATES = sorted(state.value for state in TERMINAL)
# The oldest waiting job is looked for among this many at the head of a queue (each a heap read).
QUEUE_HEAD_ROWS = 1_000
THROUGHPUT_WINDOW = dt.timedelta(minutes=5)
# A queue's rate is taken over at least this long, however recently its first job finished.
MIN_RATE_SPAN = dt.timedelta(seconds=10)
# The most finished jobs a throughput figure reads.
THROUGHPUT_SAMPLE = 50_000
# The planner settings under which a count bounded by a LIMIT walks an index and stops there.
WALK_THE_INDEX = {"enable_bitmapscan": "off", "enable_seqscan": "off", "max_parallel_workers_per_gather": "0"}
# "failed" in rates and charts: jobs that ended discarded (their last attempt failed).
OUTCOMES = (JobState.COMPLETED, JobState.DISCARDED)


@dataclass
class QueueFigures:
    counts: dict[str, Tally] = field(default_factory=dict)
    completed_per_minute: float = 0.0
    failed_per_minute: float = 0.0
    # When the oldest available job was enqueued; exact when the whole
    # backlog fits in QUEUE_HEAD_ROWS, else the oldest among the head.
    oldest_available_at: dt.datetime | None = None
    oldest_exact: bool = True
    # Seconds the oldest available job has waited (0 when none waits), as of the figures' clock.
    oldest_available_age_seconds: float = 0.0
    # A paused queue hands out no job: it does not drain, whatever its rate before the pause.
    paused: bool = False

    @property
    def estimated_drain_seconds(self) -> float | None:
        """How long the available jobs take to finish at the recent rate (``drain_seconds``); None
        while the queue is paused and jobs wait."""
        waiting = self.counts.get(JobState.AVAILABLE.value)
        available = waiting.value if waiting else 0
        if self.paused and available > 0:
            return None
        return drain_seconds(available, self.completed_per_minute + self.failed_per_minute)


def drain_seconds(available: int, finished_per_minute: float) -> float | None:
    """``available`` jobs at ``finished_per_minute`` (jobs completed or discarded per minute over
    ``THROUGHPUT_WINDOW``): seconds to drain, rounded to the second; 0 when none waits; None when
    jobs wait and none finished in the window -- no rate to estimate from (a queue without
    workers, or just started), never a made-up figure."""
    if available <= 0:
        return 0.0
    if finished_per_minute <= 0:
        return None
    return float(round(available / finished_per_minute * 60))


@dataclass(frozen=True)
class Throughput:
    per_queue: dict[str, dict[str, int]]
    window: dt.timedelta
    # True when more jobs finished in the window than the sample holds: the
    # window was shortened to the most recent THROUGHPUT_SAMPLE of them.
    shortened: bool
    # Per queue, when its first job in the window finished.
    first_finished: dict[str, dt.datetime] = field(default_factory=dict)

    def span_of(self, queue: str, now: dt.datetime) -> dt.timedelta:
        """The part of the window ``queue``'s rate is taken over: the whole window, or, when its first
        finish in it is later, from there, plus the mean gap between its finishes (the time before the
        first that it was already working), and at least ``MIN_RATE_SPAN``. A queue whose workers started
        a minute ago is judged by that minute, not by five minutes it did no work in: its time to drain
        was overstated as much as fiftyfold at first, and an autoscaler reading it went to its maximum."""
        first = self.first_finished.get(queue)
        if first is None:
            return self.window
        finished = sum(self.per_queue.get(queue, {}).values())
        working = (now - first) * (1 + 1 / max(finished, 1))
        return min(self.window, max(working, MIN_RATE_SPAN))


def queue_figures(names: list[str], now: dt.datetime) -> dict[str, QueueFigures]:
    """Counts by state, throughput and the oldest waiting job of each named queue."""
    figures = {name: QueueFigures() for name in names}
    if not names:
        return figures
    for name in Queue.objects.filter(name__in=names, paused=True).values_list("name", flat=True):
        figures[name].paused = True
    counts, oldest = queue_depths(names)
    for (name, state), tally in counts.items():
        figures[name].counts[state] = tally
    for name, at in oldest.items():
        figures[name].oldest_available_at = at
        figures[name].oldest_available_age_seconds = oldest_age_seconds(at, now)
        figures[name].oldest_exact = oldest_is_exact(figures[name].counts[JobState.AVAILABLE.value])
    rates = throughput(now)
    for name in names:
        minutes = rates.span_of(name, now).total_seconds() / 60
        per_state = rates.per_queue.get(name, {})
        figures[name].completed_per_minute = per_state.get(JobState.COMPLETED.value, 0) / minutes
        figures[name].failed_per_minute = per_state.get(JobState.DISCARDED.value, 0) / minutes
    return figures


def oldest_age_seconds(at: dt.datetime | None, now: dt.datetime) -> float:
    """Seconds since ``at`` (the oldest available job's enqueue), to the millisecond; 0 when none waits."""
    return round(max((now - at).total_seconds(), 0.0), 3) if at else 0.0


def oldest_is_exact(available: Tally) -> bool:
    """Is the oldest available job found among the head (``QUEUE_HEAD_ROWS``) the queue's oldest:
    do all its ``available`` jobs fit in the head? Else its age is a lower bound."""
    return available.exact and available.value <= QUEUE_HEAD_ROWS


def queue_depths(names: list[str]) -> tuple[dict[tuple[str, str], Tally], dict[str, dt.datetime | None]]:
    """Jobs per (queue, state) -- the live states' exact up to LIVE_COUNT_LIMIT, the finished states'
    exact up to QUEUE_COUNT_LIMIT, each estimated past its bound -- and when each queue's oldest
    available job was enqueued (among its head). Also what the Prometheus scrape reads
    (``observe/metrics.py``) and the API's queue statistics. Three statements, whatever the number
    of queues; none reads finished history beyond the bound."""
    if not names:
        return {}, {}
    counts = {(name, state.value): 0 for name in names for state in JobState}
    counts.update(_finished_counts(names))
    tallies = {key: _bounded_tally(key, value) for key, value in counts.items()}
    tallies.update(_live_counts(names))
    return tallies, oldest_available(names)


def _live_counts(names: list[str]) -> dict[tuple[str, str], Tally]:
    """The waiting and held jobs of ``names`` per queue and state: one statement grouping the live rows,
    read from the partial indexes that hold only them -- ``ojs_job_available`` for the available
    jobs, ``ojs_job_queue_state`` for the others, by queue and by an explicit list of live states (so a
    table partitioned by state reads its live partition only). Exact up to ``LIVE_COUNT_LIMIT`` rows of
    each of the two kinds; past that, the planner's estimates for the queues of that kind."""
    if not names:
        return {}
    table = connection.ops.quote_name(Job._meta.db_table)
    queues = ", ".join(["%s"] * len(names))
    held = ", ".join(["%s"] * len(HELD_STATES))
    sql = (
        f"SELECT queue, %s, COUNT(*), 0 FROM (SELECT queue FROM {table} WHERE state = %s AND queue IN ({queues})"
        f" LIMIT %s) available GROUP BY queue"
        f" UNION ALL SELECT queue, state, COUNT(*), 1 FROM (SELECT queue, state FROM {table}"
        f" WHERE state IN ({held}) AND queue IN ({queues}) LIMIT %s) held GROUP BY queue, state"
    )
    available = JobState.AVAILABLE.value
    params: list[str | int] = [available, available, *names, LIVE_COUNT_LIMIT, *HELD_STATES, *names, LIVE_COUNT_LIMIT]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found = {(name, state): 0 for name in names for state in (available, *HELD_STATES)}
    read = [0, 0]
    for queue, state, n, part in rows:
        found[(queue, state)] = n
        read[part] += n
    cut = {available} if read[0] >= LIVE_COUNT_LIMIT else set()
    cut |= set(HELD_STATES) if read[1] >= LIVE_COUNT_LIMIT else set()
    tallies = {}
    for (name, state), value in found.items():
        if state in cut:
            estimate = planner_estimate(Job.objects.filter(queue=name, state=state)) or 0
            tallies[(name, state)] = Tally(max(estimate, value), False, at_least=estimate < value)
        else:
            tallies[(name, state)] = Tally(value, True)
    return tallies


def _finished_counts(names: list[str]) -> dict[tuple[str, str], int]:
    """Finished jobs per queue and finished state, each counted to at most ``QUEUE_COUNT_LIMIT + 1``:
    one statement, a small subquery per finished state run once per queue. The state is written out,
    not a parameter: the planner then proves the partial index ``ojs_job_queue_state`` (and, on a table
    partitioned by state, the partitions) from it; with the state a parameter it scanned the table."""
    table = connection.ops.quote_name(Job._meta.db_table)
    queues = ", ".join(["(%s)"] * len(names))
    counts = ", ".join(
        f"(SELECT COUNT(*) FROM (SELECT 1 FROM {table} j WHERE j.queue = queues.name AND j.state = '{state}'"
        f" LIMIT %s) c)"
        for state in FINISHED_STATES
    )
    sql = f"WITH queues(name) AS (VALUES {queues}) SELECT queues.name, {counts} FROM queues"
    # A count stops at its LIMIT only when it walks the index. The planner prefers a bitmap scan for a
    # queue with many finished jobs, which reads every one of its entries first (200,000 in a day's
    # partition: 8 ms, per queue and scrape), and a sequential scan for a small queue in a big
    # partition; workers in parallel cost more than the 1,001 rows. Without them, 200 queues of a
    # million finished jobs were counted in 14 ms instead of 37 to 80.
    with local_settings(connection.alias, **WALK_THE_INDEX), connection.cursor() as cursor:
        cursor.execute(sql, [*names, *[QUEUE_COUNT_LIMIT + 1] * len(FINISHED_STATES)])
        return {(row[0], state): n for row in cursor.fetchall() for state, n in zip(FINISHED_STATES, row[1:])}


def _bounded_tally(key: tuple[str, str], value: int) -> Tally:
    """A count stopped at ``QUEUE_COUNT_LIMIT + 1``: exact within the bound, the planner's estimate past it
    (without a planner, SQLite's development database, counted whole as ``count_rows`` does: the bound
    itself is no count)."""
    if value <= QUEUE_COUNT_LIMIT:
        return Tally(value, True)
    name, state = key
    estimate = planner_estimate(Job.objects.filter(queue=name, state=state))
    if estimate is None:
        return Tally(Job.objects.filter(queue=name, state=state).count(), True)
    return Tally(max(estimate, value), False, at_least=estimate < value)


def oldest_available(names: list[str]) -> dict[str, dt.datetime | None]:
    """When each queue's oldest available job was enqueued, among its first ``QUEUE_HEAD_ROWS`` in claim
    order (exact when the whole backlog fits): one statement, one subquery run per queue from
    ``ojs_job_available``, no counting."""
    if not names:
        return {}
    table = connection.ops.quote_name(Job._meta.db_table)
    queues = ", ".join(["(%s)"] * len(names))
    sql = (
        f"WITH queues(name) AS (VALUES {queues}) "
        f"SELECT queues.name, (SELECT MIN(enqueued_at) FROM (SELECT enqueued_at FROM {table} j"
        f" WHERE j.queue = queues.name AND j.state = %s ORDER BY j.priority DESC, j.seq LIMIT %s) h) FROM queues"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*names, JobState.AVAILABLE.value, QUEUE_HEAD_ROWS])
        return {name: _as_datetime(value) for name, value in cursor.fetchall()}


def throughput(now: dt.datetime, window: dt.timedelta = THROUGHPUT_WINDOW) -> Throughput:
    """Jobs completed and failed per queue over the last ``window`` (or its most recent part)."""
    per_queue: dict[str, dict[str, int]] = {}
    first_finished: dict[str, dt.datetime] = {}
    start = now - window
    shortened = False
    for state in OUTCOMES:
        cutoff = _sample_start(state, now - window, THROUGHPUT_SAMPLE)
        if cutoff is not None and cutoff > start:
            start, shortened = cutoff, True
    for state in OUTCOMES:
        rows = (
            Job.objects.filter(state=state, finished_at__gte=start)
            .values_list("queue")
            .annotate(n=Count("*"), first=Min("finished_at"))
            .order_by()
        )
        for queue, n, first in rows:
            per_queue.setdefault(queue, {})[state.value] = n
            first_finished[queue] = min(first, first_finished.get(queue, first))
    return Throughput(per_queue, max(now - start, dt.timedelta(seconds=1)), shortened, first_finished)


def live_counts() -> dict[tuple[str, str], Tally]:
    """The waiting and held jobs per (queue, state) of every queue that has jobs: the grouped count the
    queue figures make (``_live_counts``)."""
    return _live_counts(queues_with_jobs())


def available_by_queue(live: Mapping[tuple[str, str], Tally]) -> dict[str, Tally]:
    """Queue -> its available jobs, from ``live_counts``."""
    return {queue: tally for (queue, state), tally in live.items() if state == JobState.AVAILABLE.value}


def state_counts(live: Mapping[tuple[str, str], Tally] | None = None) -> dict[str, Tally]:
    """How many jobs are in each state (in STATE_ORDER): the live states' summed from ``live``
    (``live_counts``, made here when not given), the finished states' exact up to ``EXACT_COUNT_LIMIT``
    (read from ``ojs_job_finished``) and estimated beyond."""
    by_state: dict[str, list[Tally]] = {}
    for (_, state), tally in (live_counts() if live is None else live).items():
        by_state.setdefault(state, []).append(tally)
    counts = {}
    for state in STATE_ORDER:
        if state in TERMINAL:
            counts[state.value] = count_rows(Job.objects.filter(state=state))
        else:
            tallies = by_state.get(state.value, [])
            counts[state.value] = Tally(sum(t.value for t in tallies), all(t.exact for t in tallies),
                                        at_least=any(t.at_least for t in tallies))
    return counts


def job_types(limit: int) -> list[str]:
    """Every distinct job type (at most ``limit``), by a loose index scan: one probe of ``ojs_job_type`` per type."""
    table = connection.ops.quote_name(Job._meta.db_table)
    sql = (
        f"WITH RECURSIVE types(type) AS ("
        f" SELECT min(type) FROM {table}"
        f" UNION ALL"
        f" SELECT (SELECT min(type) FROM {table} WHERE type > types.type) FROM types WHERE types.type IS NOT NULL"
        f") SELECT type FROM types WHERE type IS NOT NULL LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        return [row[0] for row in cursor.fetchall()]


def queues_with_jobs() -> list[str]:
    """Every queue some job is in, by loose index scans (one probe per queue) of the two indexes that
    between them hold every job by queue: ``ojs_job_available`` and ``ojs_job_queue_state``."""
    sql = (
        f"WITH RECURSIVE {_queue_probe('waiting', 'state = %s')}, {_queue_probe('other', 'state <> %s')}"
        " SELECT queue FROM waiting WHERE queue IS NOT NULL UNION SELECT queue FROM other WHERE queue IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [JobState.AVAILABLE.value] * 4)
        return sorted(row[0] for row in cursor.fetchall())


def queues_with_available() -> list[str]:
    """Every queue with an available job, by name: a loose index scan of ``ojs_job_available``."""
    sql = f"WITH RECURSIVE {_queue_probe('waiting', 'state = %s')} SELECT queue FROM waiting WHERE queue IS NOT NULL"
    with connection.cursor() as cursor:
        cursor.execute(sql, [JobState.AVAILABLE.value] * 2)
        return [row[0] for row in cursor.fetchall()]


def _queue_probe(name: str, condition: str) -> str:
    """``name(queue)``: the queues of the jobs matching ``condition`` (two placeholders' worth), in
    order, one index probe each: the smallest, then the smallest after it, and so on."""
    table = connection.ops.quote_name(Job._meta.db_table)
    return (
        f"{name}(queue) AS (SELECT MIN(queue) FROM {table} WHERE {condition}"
        f" UNION ALL SELECT (SELECT MIN(queue) FROM {table} WHERE {condition} AND queue > {name}.queue)"
        f" FROM {name} WHERE {name}.queue IS NOT NULL)"
    )


def _sample_start(state: JobState, since: dt.datetime, sample: int) -> dt.datetime | None:
    """When the ``sample``-th most recent job finished in ``state`` after ``since``, if so many did."""
    found = (
        Job.objects.filter(state=state, finished_at__gte=since)
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)[sample - 1 : sample]
    )
    return next(iter(found), None)


def _as_datetime(value: object) -> dt.datetime | None:
    """A timestamp from raw SQL: PostgreSQL gives datetimes, SQLite gives text."""
    if value is None or isinstance(value, dt.datetime):
        return value
    parsed = parse_datetime(str(value))
    return parsed.replace(tzinfo=dt.UTC) if parsed and parsed.tzinfo is None else parsed


def queue_stats(name: str) -> dict[str, Any]:
    """One queue's statistics for the HTTP API (ojs-http-binding §11.2), from the same counts as the admin
    and the metrics: jobs per state (exact up to ``QUEUE_COUNT_LIMIT``, estimated past it), the last
    hour's outcomes (past ``THROUGHPUT_SAMPLE`` of them, scaled from the most recent part of the hour),
    and the oldest available job's age (0 when none waits; a lower bound when not exact, as the admin
    API's). No figure reads history beyond those bounds."""
    now = db_now()
    tallies, oldest = queue_depths([name])
    counts = {state.value: tallies[(name, state.value)].value for state in JobState}
    hour = dt.timedelta(hours=1)
    rates = throughput(now, hour)
    scale = hour / rates.window
    outcomes = rates.per_queue.get(name, {})
    completed = round(outcomes.get(JobState.COMPLETED.value, 0) * scale)
    return {
        **counts,
        # The states counted past their bound: the planner's estimate, as the admin API names them.
        "counts_estimated": [state.value for state in JobState if not tallies[(name, state.value)].exact],
        "completed_last_hour": completed,
        "failed_last_hour": round(outcomes.get(JobState.DISCARDED.value, 0) * scale),
        "throughput_per_second": round(completed / 3600, 3),
        "oldest_available_age_ms": round(oldest_age_seconds(oldest.get(name), now) * 1000),
        "oldest_available_exact": oldest_is_exact(tallies[(name, JobState.AVAILABLE.value)]),
        "computed_at": now,
    }


def dead_letter_stats(selection: QuerySet | None = None) -> dict[str, Any]:
    """ojs-dead-letter §10.1: the dead letter's jobs by queue and last error type, and their span.

    The dead letter is ``core/dead_letter.dead_letter_jobs()``: plain discards
    are not counted. ``selection`` narrows it (the admin API's filter).
    """
    dead = dead_letter_jobs() if selection is None else selection & dead_letter_jobs()
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
        "by_queue": by_queue,
        "by_error_type": {error_type or "Unknown": n for error_type, n in by_type},
    }
