"""The statistics history: what the reaper counts per minute, sums per hour, prunes, and what ``series`` reads.

Time is simulated: the moves are the core's own (their events included), and
then their timestamps are set back into past minutes; buckets for past days
are written directly and read back.
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connections, transaction

from django_ojs.core import history, maintenance
from django_ojs.core.clock import db_now
from django_ojs.core.history import GRACE, HOUR, LIVE_TAIL, MINUTE, hour_floor, minute_floor
from django_ojs.models import Event, HistoryCursor, Job, StatsBucket
from django_ojs.protocol.failure import Failure
from tests.helpers import history_running_since
from tests.waiting import PATIENCE

MIN = dt.timedelta(minutes=1)


def buckets(span: str = MINUTE) -> dict[tuple[dt.datetime, str, str], int]:
    return {(row.start, row.queue, row.transition): row.count for row in StatsBucket.objects.filter(span=span)}


def at_time(jobs: list[Job], at: dt.datetime, **columns: object) -> None:
    """Move these jobs and every event of theirs to ``at`` (and set ``columns`` on the jobs)."""
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(**columns)
    Event.objects.filter(job_id__in=[job.id for job in jobs]).update(time=at)


def test_the_reaper_counts_a_closed_minute_per_queue_and_transition_once(db, push, ojs):
    now = db_now()
    minute = minute_floor(now) - 5 * MIN
    history_running_since(minute - 10 * MIN, counted_through=minute)
    mail = [push(type="mail.send", options={"queue": "mail"}) for _ in range(3)]
    sms = push(type="sms.send", options={"queue": "sms"})
    at_time(mail[:2], minute + dt.timedelta(seconds=10), state="completed", finished_at=minute + dt.timedelta(seconds=20))
    at_time([mail[2]], minute + dt.timedelta(seconds=10), state="cancelled", finished_at=minute + 2 * MIN)
    at_time([sms], minute + dt.timedelta(seconds=50), state="discarded", finished_at=minute + dt.timedelta(seconds=55))
    retried = push(type="mail.send", options={"queue": "flaky", "retry": {"max_attempts": 3}})
    [claimed] = Job.objects.fetch(["flaky"], worker_id="w1")
    Job.objects.fail(claimed.id, Failure(type="Timeout", message="slow"))
    at_time([retried], minute + dt.timedelta(seconds=30))
    untouched = push(options={"queue": "later"})  # its events stay in the minute in progress

    counted = maintenance.record_history(500)

    assert counted == int((minute_floor(now - GRACE) - minute) / MIN)
    assert buckets() == {
        (minute, "mail", "enqueued"): 3,
        (minute, "mail", "completed"): 2,
        (minute + 2 * MIN, "mail", "cancelled"): 1,
        (minute, "sms", "enqueued"): 1,
        (minute, "sms", "discarded"): 1,
        (minute, "flaky", "enqueued"): 1,  # its first attempt; the retry's own entry is attempt 1, not counted
        (minute, "flaky", "retried"): 1,
    }
    assert Job.objects.filter(pk=untouched.pk).exists()
    assert HistoryCursor.objects.get().counted_through == minute_floor(now - GRACE)
    # Counted once: a second run finds nothing new to count and leaves the buckets as they are.
    assert maintenance.record_history(500) == 0
    assert len(buckets()) == 7


def test_a_reaper_back_after_a_stop_catches_up_in_calls_of_at_most_limit_minutes(db, push):
    now = db_now()
    stopped = minute_floor(now) - 120 * MIN
    history_running_since(stopped - 60 * MIN, counted_through=stopped)
    job = push(options={"queue": "q"})
    at_time([job], stopped + 70 * MIN, state="completed", finished_at=stopped + 70 * MIN)

    assert maintenance.record_history(50) == 50
    assert HistoryCursor.objects.get().counted_through == stopped + 50 * MIN
    assert maintenance.record_history(50) == 50
    assert buckets() == {(stopped + 70 * MIN, "q", "completed"): 1, (stopped + 70 * MIN, "q", "enqueued"): 1}
    assert maintenance.record_history(50) == int((minute_floor(now - GRACE) - stopped) / MIN) - 100


def test_hours_are_summed_from_their_minutes_and_old_buckets_pruned(db, ojs):
    ojs(RETENTION={"history_minutes": 2 * 86400, "history_hours": 35 * 86400})
    now = db_now()
    hour = hour_floor(now) - 3 * dt.timedelta(hours=1)
    cursor = history_running_since(hour - dt.timedelta(days=40))
    HistoryCursor.objects.filter(pk=cursor.pk).update(rolled_through=hour)
    for index in range(60):
        StatsBucket.objects.create(span=MINUTE, start=hour + index * MIN, queue="q", transition="completed", count=2)
        StatsBucket.objects.create(span=MINUTE, start=hour + index * MIN, queue="r", transition="completed", count=1)
    StatsBucket.objects.create(span=MINUTE, start=hour + 61 * MIN, queue="q", transition="discarded", count=5)
    stale_minute = minute_floor(now) - dt.timedelta(days=2, minutes=1)
    stale_hour = hour_floor(now) - dt.timedelta(days=35, hours=1)
    StatsBucket.objects.create(span=MINUTE, start=stale_minute, queue="q", transition="completed", count=1)
    StatsBucket.objects.create(span=HOUR, start=stale_hour, queue="q", transition="completed", count=1)

    maintenance.record_history(500)

    assert buckets(HOUR) == {
        (hour, "q", "completed"): 120,
        (hour, "r", "completed"): 60,
        (hour + dt.timedelta(hours=1), "q", "discarded"): 5,
    }
    assert HistoryCursor.objects.get().rolled_through == hour_floor(now)
    assert not StatsBucket.objects.filter(start__in=[stale_minute, stale_hour]).exists()


def _thirty_days(now: dt.datetime) -> dt.datetime:
    """Hour buckets for every hour of the last 30 days and minute buckets for the last day:
    2 completed and 1 discarded per hour in "q", 1 completed per hour in "r"; 1 completed per minute in "q"."""
    start = hour_floor(now) - dt.timedelta(days=30)
    hours = [start + index * dt.timedelta(hours=1) for index in range(30 * 24)]
    StatsBucket.objects.bulk_create(
        [StatsBucket(span=HOUR, start=at, queue="q", transition="completed", count=2) for at in hours]
        + [StatsBucket(span=HOUR, start=at, queue="q", transition="discarded", count=1) for at in hours]
        + [StatsBucket(span=HOUR, start=at, queue="r", transition="completed", count=1) for at in hours]
    )
    minutes = [minute_floor(now) - index * MIN for index in range(1, 24 * 60)]
    StatsBucket.objects.bulk_create(
        [StatsBucket(span=MINUTE, start=at, queue="q", transition="completed", count=1) for at in minutes]
    )
    return start


def test_thirty_days_of_hours_read_per_day_per_hour_and_per_queue(db, ojs):
    ojs(EVENTS=True)
    now = db_now()
    start = _thirty_days(now)
    history_running_since(start - dt.timedelta(days=1))

    days = history.series("1d", now - dt.timedelta(days=29), now, now)
    assert len(days.slots) == 30 and days.slots[-1] == now.replace(hour=0, minute=0, second=0, microsecond=0)
    whole = days.values["completed"][1:-1]
    assert whole == [24 * 3] * 28  # a whole day: 24 hours of 2 + 1
    assert days.values["discarded"][1:-1] == [24] * 28
    assert days.values["enqueued"][1:-1] == [0] * 28  # counted, and none: zero, not unknown

    one_queue = history.series("1d", now - dt.timedelta(days=29), now, now, queue="r")
    assert one_queue.values["completed"][1:-1] == [24] * 28 and one_queue.values["discarded"][1:-1] == [0] * 28

    hours = history.series("1h", hour_floor(now) - dt.timedelta(hours=30), hour_floor(now) - dt.timedelta(hours=6), now)
    assert hours.values["completed"] == [3] * 24 and hours.slots[0] == hour_floor(now) - dt.timedelta(hours=30)
    # Unaligned bounds: the slot holding `since` is the first, the last starts before `until`.
    assert len(history.series("1h", now - dt.timedelta(hours=30), now - dt.timedelta(hours=6), now).slots) == 25

    five = history.series("5m", now - dt.timedelta(hours=2), now - dt.timedelta(hours=1), now)
    assert set(five.values["completed"][1:]) == {5}  # five minutes of one each


def test_what_the_history_does_not_know_is_none_not_zero(db, ojs):
    ojs(RETENTION={"history_minutes": 86400, "history_hours": 10 * 86400})
    now = db_now()
    began = hour_floor(now) - dt.timedelta(days=20)
    history_running_since(began)

    before = history.series("1d", began - dt.timedelta(days=3), began + dt.timedelta(days=1), now)
    assert before.values["completed"][:3] == [None] * 3  # before the history began (and past retention)
    recent = history.series("1h", now - dt.timedelta(days=12), now, now)
    known = [value for value in recent.values["completed"] if value is not None]
    assert recent.values["completed"][:24] == [None] * 24 and len(known) <= 10 * 24 + 1
    ojs(EVENTS=False)
    off = history.series("1h", now - dt.timedelta(hours=3), now, now)
    assert set(off.values["enqueued"]) == {None} and set(off.values["retried"]) == {None}
    assert None not in off.values["completed"]


def test_a_slot_the_history_knows_only_part_of_is_none_not_that_part(db):
    """The history began 22 minutes into an hour, and a reaper stopped 10 minutes into a later one:
    those hours' counts are parts (work before the start, or after the stop, uncounted), never
    given as the hours' whole."""
    now = db_now()
    began = hour_floor(now) - dt.timedelta(hours=5) + 22 * MIN
    stopped = hour_floor(now) - dt.timedelta(hours=2) + 10 * MIN  # past LIVE_TAIL: nothing counted live
    history_running_since(began, counted_through=stopped)
    StatsBucket.objects.create(span=MINUTE, start=began + MIN, queue="q", transition="completed", count=1)
    StatsBucket.objects.create(span=HOUR, start=hour_floor(began) + 60 * MIN, queue="q", transition="completed",
                               count=1)
    StatsBucket.objects.create(span=MINUTE, start=stopped - MIN, queue="q", transition="completed", count=1)

    hours = history.series("1h", hour_floor(now) - dt.timedelta(hours=6), hour_floor(now), now)
    # 6 hours back: before the start, its start, two whole hours, the reaper's stop, after it.
    assert hours.values["completed"] == [None, None, 1, 0, None, None]
    minutes = history.series("1m", began - MIN, began + 2 * MIN, now)
    assert minutes.values["completed"] == [None, 0, 1]  # a minute is whole from the start on


def test_minutes_not_counted_yet_are_counted_live_while_the_reaper_keeps_up(db, push):
    now = db_now()
    history_running_since(minute_floor(now) - 30 * MIN, counted_through=minute_floor(now) - 2 * MIN)
    done = push(options={"queue": "q"})
    at_time([done], minute_floor(now) - MIN + dt.timedelta(seconds=5), state="completed",
            finished_at=minute_floor(now) - MIN + dt.timedelta(seconds=5))

    found = history.latest("1m", 5, now)
    assert found.live and found.values["completed"] == [0, 0, 0, 1, 0]
    assert found.values["enqueued"][3] == 1
    assert not StatsBucket.objects.exists()  # read, not written

    # A reaper far behind: the minutes it has not counted are unknown, not counted on every read.
    HistoryCursor.objects.update(counted_through=minute_floor(now) - LIVE_TAIL - 5 * MIN)
    behind = history.latest("1m", 5, now)
    assert not behind.live and behind.values["completed"] == [None] * 5


def test_no_reaper_has_run_no_history(db):
    now = db_now()
    found = history.latest("1h", 24, now)
    assert found.counted_through is None and set(found.values["completed"]) == {None}


def test_the_first_run_starts_the_history_at_the_next_minute(db):
    now = db_now()
    assert maintenance.record_history(500) == 0
    cursor = HistoryCursor.objects.get()
    assert cursor.began_at == cursor.counted_through == minute_floor(now) + MIN
    assert len(cursor.marks) == 1


@pytest.mark.parametrize(("period", "since", "until"), [("2m", 60, 0), ("1m", 60, 61), ("1m", 4000, 0)])
def test_a_period_or_range_the_history_cannot_answer_is_refused(db, period, since, until):
    from django_ojs.protocol.errors import InvalidRequest

    now = db_now()
    with pytest.raises(InvalidRequest):
        history.series(period, now - dt.timedelta(minutes=since), now - dt.timedelta(minutes=until), now)


@pytest.mark.postgres
def test_one_reaper_counts_at_a_time_the_other_skips(transactional_db):
    now = db_now()
    history_running_since(minute_floor(now) - 30 * MIN, counted_through=minute_floor(now) - 20 * MIN)
    holding, release = threading.Event(), threading.Event()

    def hold_the_cursor() -> None:
        try:
            with transaction.atomic():
                HistoryCursor.objects.select_for_update().get()
                holding.set()
                release.wait(PATIENCE)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_cursor)
    holder.start()
    try:
        assert holding.wait(PATIENCE)
        assert maintenance.record_history(500) == 0  # skipped at once, not waiting
    finally:
        release.set()
        holder.join(PATIENCE)
    assert maintenance.record_history(500) > 0


@pytest.mark.postgres
def test_each_figure_is_what_the_prometheus_metric_of_its_name_counts(transactional_db, spec):
    pytest.importorskip("prometheus_client")
    from prometheus_client import REGISTRY

    from django_ojs.observe import metrics

    names = {"enqueued": "ojs_job_enqueued_total", "completed": "ojs_job_completed_total",
             "discarded": "ojs_job_failed_total", "retried": "ojs_job_retried_total",
             "cancelled": "ojs_job_cancelled_total"}

    def counted() -> dict[str, float]:
        return {transition: REGISTRY.get_sample_value(name, {"queue": "agree", "type": "agree.job"}) or 0.0
                for transition, name in names.items()}

    metrics.enable()
    try:
        before = counted()
        now = db_now()
        minute = minute_floor(now) - 3 * MIN
        history_running_since(minute - 10 * MIN, counted_through=minute)
        job = {"type": "agree.job", "args": [], "options": {"queue": "agree", "retry": {"max_attempts": 2}}}
        jobs = Job.objects.push_many([spec(**job) for _ in range(5)])
        claimed = Job.objects.fetch(["agree"], count=4, worker_id="w1")
        Job.objects.ack(claimed[0].id)
        Job.objects.fail(claimed[1].id, Failure(type="Flaky", message="again"))  # retried
        Job.objects.fail(claimed[2].id, Failure(type="Fatal", message="no", retryable=False))  # discarded
        Job.objects.cancel(claimed[3].id)
        at_time(jobs, minute + dt.timedelta(seconds=30))
        Job.objects.filter(pk__in=[j.pk for j in jobs], finished_at__isnull=False).update(
            finished_at=minute + dt.timedelta(seconds=40))
        after = counted()
    finally:
        metrics.disable()

    maintenance.record_history(500)

    stored = {transition: n for (start, queue, transition), n in buckets().items() if queue == "agree"}
    assert stored == {transition: int(after[transition] - before[transition]) for transition in names
                      if after[transition] > before[transition]}
    assert stored == {"enqueued": 5, "completed": 1, "retried": 1, "discarded": 1, "cancelled": 1}
