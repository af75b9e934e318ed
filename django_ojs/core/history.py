"""The statistics history: jobs per queue and transition, per minute and per hour (ojs-admin-api §10.2).

The reaper counts each minute once it has closed (``maintenance.record_history``),
never the moves themselves: no counter row that every ACK would update (DESIGN
invariant 7). ``GET /ojs/v1/admin/stats/history`` and the admin overview's chart
read it through ``series``, so they say the same.

The transitions, each the fact the Prometheus metric of its name counts:

- ``completed``, ``discarded`` (on the wire and in the chart: "failed"),
  ``cancelled``: jobs that ended so, read from the index of finished jobs
  (``ojs_job_finished``: state, finished_at);
- ``enqueued`` (jobs that became available for their first attempt: the
  ``job.enqueued`` events of attempt 0) and ``retried`` (failed attempts that
  will run again: ``job.retrying``), read from the events after a *mark*: the
  newest event's ``seq`` read before the minute began, so a minute's count
  reads about a minute of events, not the table. With ``OJS["EVENTS"]`` off
  they are not known (None).

A minute is counted once, ``GRACE`` after it closed: a transaction that began
in it and commits later still is not counted (a worker's batch commits within
milliseconds). Minutes missed while no reaper ran are counted when one runs
again, back to ``RETENTION["history_minutes"]``. An hour is summed from its
minutes once its last minute is counted. When read, the minutes not counted
yet (a minute or two) are counted live, if the reaper is within ``LIVE_TAIL``
of now; otherwise they are unknown (None), never zero.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.db.models import BigIntegerField, Count, Max, Q, Sum
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, TruncHour, TruncMinute

from ..conf import ojs_settings
from ..models import Event, HistoryCursor, Job, StatsBucket
from ..protocol.errors import InvalidRequest
from ..protocol.states import JobState
from .clock import db_clock

MINUTE, HOUR = "minute", "hour"
SPANS = {MINUTE: dt.timedelta(minutes=1), HOUR: dt.timedelta(hours=1)}
# Read from the index of finished jobs.
FINISHED = {"completed": JobState.COMPLETED, "discarded": JobState.DISCARDED, "cancelled": JobState.CANCELLED}
# Read from the events: the event type, and the condition on it.
FROM_EVENTS = {
    # Events written before the job's fields had columns (migration 0033) hold them in extra.
    "enqueued": Q(type="job.enqueued") & (Q(attempt=0) | Q(attempt__isnull=True, extra__attempt=0)),
    "retried": Q(type="job.retrying"),
}
EVENT_TYPES = {"job.enqueued": "enqueued", "job.retrying": "retried"}
TRANSITIONS = ("enqueued", "completed", "discarded", "retried", "cancelled")
GRACE = dt.timedelta(seconds=10)
LIVE_TAIL = dt.timedelta(minutes=15)
CURSOR_ROW = 1
# ojs-admin-api §10.2 periods: each slot's length, and the span its figures are summed from.
PERIODS = {
    "1m": (dt.timedelta(minutes=1), MINUTE),
    "5m": (dt.timedelta(minutes=5), MINUTE),
    "1h": (dt.timedelta(hours=1), HOUR),
    "1d": (dt.timedelta(days=1), HOUR),
}
MAX_SLOTS = 3000
# The times a history read may name (``readable``).
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)

Key = tuple[dt.datetime, str, str]  # (minute, queue, transition)


# -- counting (the reaper) ------------------------------------------------------------------

def cursor_for_update(now: dt.datetime) -> HistoryCursor | None:
    """The history's cursor, locked; None while another reaper holds it.

    The first call ever starts the history at the next whole minute: the
    minute in progress began before any mark could be read.
    """
    cursor = HistoryCursor.objects.select_for_update(skip_locked=True).filter(id=CURSOR_ROW).first()
    if cursor is not None or HistoryCursor.objects.filter(id=CURSOR_ROW).exists():
        return cursor
    start = minute_floor(now) + SPANS[MINUTE]
    try:
        with transaction.atomic():
            return HistoryCursor.objects.create(
                id=CURSOR_ROW, began_at=start, counted_through=start, rolled_through=hour_floor(start),
                marks=[],
            )
    except IntegrityError:
        return None  # another reaper made it a moment ago: it counts


def add_mark(cursor: HistoryCursor, now: dt.datetime) -> None:
    """Note the newest event's seq, once a minute, and forget the marks no window needs any more."""
    marks = _marks(cursor)
    if not marks or minute_floor(marks[-1][0]) < minute_floor(now):
        newest = Event.objects.aggregate(newest=Max("seq"))["newest"] or 0
        # The clock after the read, not the transaction's start: an event stamped
        # between the two could have a seq below the mark.
        marks.append((db_clock(), newest))
    # The next window starts at counted_through: it needs the latest mark read before then.
    usable = [index for index, (at, _) in enumerate(marks) if at <= cursor.counted_through]
    kept = marks[usable[-1]:] if usable else marks
    cursor.marks = [[at.isoformat(), seq] for at, seq in kept]


def count_minutes(cursor: HistoryCursor, now: dt.datetime, limit: int) -> int:
    """Count the minutes closed at least ``GRACE`` ago and not counted yet, at most ``limit``; return how many."""
    horizon = minute_floor(now - _retention(MINUTE))
    start = max(cursor.counted_through, horizon)
    end = min(minute_floor(now - GRACE), start + limit * SPANS[MINUTE])
    if end <= start:
        return 0
    counts = count_window(start, end, event_floor(cursor, start))
    write(MINUTE, counts)
    cursor.counted_through = end
    return int((end - start) / SPANS[MINUTE])


def roll_up_hours(cursor: HistoryCursor) -> None:
    """Sum into hour buckets every hour whose minutes are all counted and not summed yet."""
    end = hour_floor(cursor.counted_through)
    if end <= cursor.rolled_through:
        return
    sums = (
        StatsBucket.objects.filter(span=MINUTE, start__gte=cursor.rolled_through, start__lt=end)
        .annotate(hour=TruncHour("start", tzinfo=dt.UTC))
        .values_list("hour", "queue", "transition")
        .annotate(n=Sum("count"))
        .order_by()
    )
    write(HOUR, Counter({(hour, queue, transition): n for hour, queue, transition, n in sums}))
    cursor.rolled_through = end


def prune(now: dt.datetime) -> int:
    """Delete the buckets past their retention; return how many."""
    return sum(
        StatsBucket.objects.filter(span=span, start__lt=now - _retention(span)).delete()[0] for span in SPANS
    )


def count_window(start: dt.datetime, end: dt.datetime, event_floor: int | None) -> Counter[Key]:
    """Jobs per (minute, queue, transition) in ``[start, end)``; the events' transitions only with a floor."""
    counts: Counter[Key] = Counter()
    for transition, state in FINISHED.items():
        rows = (
            Job.objects.filter(state=state, finished_at__gte=start, finished_at__lt=end)
            .annotate(minute=TruncMinute("finished_at", tzinfo=dt.UTC))
            .values_list("minute", "queue")
            .annotate(n=Count("*"))
            .order_by()
        )
        for minute, queue, n in rows:
            counts[(minute, queue, transition)] += n
    if ojs_settings.EVENTS and event_floor is not None:
        wanted = Q()
        for condition in FROM_EVENTS.values():
            wanted |= condition
        events = (
            Event.objects.filter(wanted, seq__gt=event_floor, time__gte=start, time__lt=end)
            .annotate(minute=TruncMinute("time", tzinfo=dt.UTC))
            .values_list("minute", "queue", "type")
            .annotate(n=Count("*"))
            .order_by()
        )
        for minute, queue, kind, n in events:
            counts[(minute, queue or "", EVENT_TYPES[kind])] += n
    return counts


def write(span: str, counts: Counter[Key]) -> None:
    """Store ``counts`` as buckets of ``span``, replacing any already there."""
    StatsBucket.objects.bulk_create(
        [
            StatsBucket(span=span, start=start, queue=queue, transition=transition, count=n)
            for (start, queue, transition), n in sorted(counts.items()) if n
        ],
        update_conflicts=True,
        unique_fields=["span", "start", "queue", "transition"],
        update_fields=["count"],
    )


def event_floor(cursor: HistoryCursor, start: dt.datetime) -> int | None:
    """The seq every event written at or after ``start`` is above: the latest mark read before it.

    None when no mark is that old (the events' transitions are then not counted).
    """
    floor = None
    for at, seq in _marks(cursor):
        if at <= start:
            floor = seq
    return floor


def _marks(cursor: HistoryCursor) -> list[tuple[dt.datetime, int]]:
    return [(dt.datetime.fromisoformat(at), int(seq)) for at, seq in cursor.marks]


# -- reading (the admin API, the overview's chart) -----------------------------------------------

@dataclass(frozen=True)
class Series:
    """Jobs per transition in each slot of ``period``, oldest first; None where it is not known."""

    period: str
    slots: list[dt.datetime]
    values: dict[str, list[int | None]]
    # How far the reaper has counted (None: it never ran), and whether the minutes after it were counted now.
    counted_through: dt.datetime | None
    live: bool

    @property
    def length(self) -> dt.timedelta:
        return PERIODS[self.period][0]


def readable(value: dt.datetime, name: str) -> dt.datetime:
    """``value`` if the history can be read at it: slot arithmetic (an hour back, a day on) stays within the
    years a datetime holds, and no job is older than the epoch."""
    if not EARLIEST <= value <= LATEST:
        raise InvalidRequest(
            f"{name} must be from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}: the history holds no other time",
            field=name,
        )
    return value


def slots_of(period: str, since: dt.datetime, until: dt.datetime) -> list[dt.datetime]:
    """The slots of ``period`` (aligned in UTC) from the one holding ``since`` to the last starting before ``until``."""
    if period not in PERIODS:
        raise InvalidRequest(f"period must be one of {', '.join(PERIODS)}", field="period")
    readable(since, "since")
    readable(until, "until")
    if until <= since:
        raise InvalidRequest("until must be later than since", field="until")
    length = PERIODS[period][0]
    first = _align(since, length)
    count = -(-(until - first) // length)
    if count > MAX_SLOTS:
        raise InvalidRequest(
            f"{count} slots of {period} from since to until; at most {MAX_SLOTS}: choose a longer period",
            field="period",
        )
    return [first + index * length for index in range(count)]


def series(period: str, since: dt.datetime, until: dt.datetime, now: dt.datetime, queue: str | None = None) -> Series:
    """The history of ``period`` slots over ``[since, until)``, for one queue or all of them."""
    slots = slots_of(period, since, until)
    length, span = PERIODS[period]
    start, end = slots[0], slots[-1] + length
    cursor = HistoryCursor.objects.filter(id=CURSOR_ROW).first()
    # Jobs per (slot index, transition).
    sums: Counter[tuple[int, str]] = Counter()
    live = False
    known_from = known_until = start
    if cursor is not None:
        rolled = cursor.rolled_through if span == HOUR else start
        sums.update(_summed(HOUR, start, start, length, queue, until=min(rolled, end)))
        sums.update(_summed(MINUTE, max(rolled, start), start, length, queue, until=min(cursor.counted_through, end)))
        known_from = max(cursor.began_at, minute_floor(now - _retention(span)))
        known_until = cursor.counted_through
        if cursor.counted_through >= now - LIVE_TAIL and end > cursor.counted_through:
            # Not counted by the reaper yet: counted here, without writing.
            tail = count_window(cursor.counted_through, end, event_floor(cursor, cursor.counted_through))
            for (minute, name, transition), n in tail.items():
                if queue is None or name == queue:
                    sums[((minute - start) // length, transition)] += n
            known_until, live = max(now, cursor.counted_through), True
    # Decided once per slot and per transition, not per figure: a day of minutes is 1,441 slots.
    # A slot is known whole or not at all: one that began before the history did (or before its
    # retention) or that ends past what was counted would give a part as the whole -- an hour of
    # work read "processed: 0". Only the slot in progress, counted live up to now, is a part.
    known = [slot >= known_from and (slot + length <= known_until or (live and slot < known_until)) for slot in slots]
    kept = {transition: ojs_settings.EVENTS or transition not in FROM_EVENTS for transition in TRANSITIONS}
    values: dict[str, list[int | None]] = {
        transition: [sums.get((index, transition), 0) if is_known else None for index, is_known in enumerate(known)]
        if kept[transition] else [None] * len(slots)
        for transition in TRANSITIONS
    }
    return Series(period, slots, values, cursor.counted_through if cursor else None, live)


def latest(period: str, count: int, now: dt.datetime, queue: str | None = None) -> Series:
    """The last ``count`` slots of ``period``, the one in progress included (the overview's chart)."""
    length = PERIODS[period][0]
    until = _align(now, length) + length
    return series(period, until - count * length, until, now, queue)


def _summed(
    span: str, begin: dt.datetime, first: dt.datetime, length: dt.timedelta, queue: str | None, *, until: dt.datetime
) -> Counter[tuple[int, str]]:
    """(slot index, transition) -> jobs, over every queue or one, from ``span`` buckets in ``[begin, until)``.

    Summed per slot by the database: a month of hours is 720 rows per queue and
    transition, and the timestamps are not what the reader needs.
    """
    if until <= begin:
        return Counter()
    rows = StatsBucket.objects.filter(span=span, start__gte=begin, start__lt=until)
    if queue is not None:
        rows = rows.filter(queue=queue)
    summed = (
        rows.annotate(slot=_slot_index(first, length)).values_list("slot", "transition")
        # A bigint, not PostgreSQL's numeric sum: an int, not a Decimal, per row read.
        .annotate(n=Cast(Sum("count"), BigIntegerField())).order_by()
    )
    return Counter({(int(slot), transition): n for slot, transition, n in summed})


def _slot_index(first: dt.datetime, length: dt.timedelta) -> RawSQL:
    """Which slot of ``length`` seconds from ``first`` a bucket falls in, as the database computes it."""
    column = f'"{StatsBucket._meta.db_table}"."start"'
    seconds = int(length.total_seconds())
    if connection.vendor == "postgresql":
        # date_part is double precision, exact for whole seconds; EXTRACT would compute in numeric.
        return RawSQL(f"FLOOR(date_part('epoch', {column} - %s) / %s)", [first, seconds],
                      output_field=BigIntegerField())
    # SQLite keeps the time as text: whole seconds since the epoch, then an integer division.
    return RawSQL(f"(CAST(strftime('%%s', {column}) AS INTEGER) - %s) / %s",
                  [int(first.timestamp()), seconds], output_field=BigIntegerField())


def minute_floor(at: dt.datetime) -> dt.datetime:
    return at.replace(second=0, microsecond=0)


def hour_floor(at: dt.datetime) -> dt.datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _align(at: dt.datetime, length: dt.timedelta) -> dt.datetime:
    """``at`` rounded down to a multiple of ``length`` since the epoch (UTC midnight for a day)."""
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return epoch + ((at - epoch) // length) * length


def _retention(span: str) -> dt.timedelta:
    key = "history_minutes" if span == MINUTE else "history_hours"
    return dt.timedelta(seconds=ojs_settings.RETENTION[key])
