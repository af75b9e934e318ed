"""FETCH through the core: Job.objects.fetch (ojs-core §7.2, ojs-worker-protocol §6)."""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter

from django_ojs.core.clock import db_now
from django_ojs.models import Job, JobError, Queue
from tests.helpers import ago, event_types, history, race, reload


def fetched_args(queues, count=1, **kwargs):
    return [job.args for job in Job.objects.fetch(queues, count=count, **kwargs)]


def test_an_empty_queue_yields_nothing(db):
    assert Job.objects.fetch(["default"]) == []


def test_queues_are_tried_in_the_order_given(push):
    push(args=["low"], options={"queue": "low"})
    push(args=["high"], options={"queue": "high"})
    assert fetched_args(["high", "low"]) == [["high"]]
    assert fetched_args(["high", "low"]) == [["low"]]


def test_a_multi_job_fetch_drains_the_first_queue_before_the_next(push):
    for name in ("b", "a", "b", "a"):
        push(args=[name], options={"queue": f"queue-{name}"})
    assert fetched_args(["queue-a", "queue-b"], count=3) == [["a"], ["a"], ["b"]]


def test_priority_high_to_low_then_first_in_first_out(push):
    for index, priority in enumerate([0, 10, -10, 10, 0, 100, -100]):
        push(args=[index], priority=priority)
    assert fetched_args(["default"], count=10) == [[5], [1], [3], [0], [4], [2], [6]]


def test_fifo_holds_for_jobs_created_in_one_batch(db, spec):
    Job.objects.push_many([spec(args=[i]) for i in range(50)])
    assert fetched_args(["default"], count=50) == [[i] for i in range(50)]


def test_count_bounds_the_claim(push):
    for index in range(5):
        push(args=[index])
    assert len(Job.objects.fetch(["default"], count=3)) == 3
    assert len(Job.objects.fetch(["default"], count=3)) == 2
    assert Job.objects.fetch(["default"], count=3) == []


def test_a_count_below_one_claims_nothing(push):
    push()
    assert Job.objects.fetch(["default"], count=0) == []
    assert Job.objects.get().state == "available"


def test_a_paused_queue_yields_nothing_until_resumed(push):
    push(args=["paused"], options={"queue": "paused"})
    push(args=["open"], options={"queue": "open"})
    Queue.objects.pause("paused")
    assert fetched_args(["paused", "open"], count=5) == [["open"]]
    Queue.objects.resume("paused")
    assert fetched_args(["paused"]) == [["paused"]]


def test_the_claim_counts_the_attempt_and_reserves_the_job_by_the_database_clock(push, is_postgres):
    job = push(options={"timeout_ms": 60_000, "visibility_timeout_ms": 90_000})
    before = db_now()
    [claimed] = Job.objects.fetch(["default"], worker_id="w1")
    after = db_now()
    stored = reload(job)
    assert (stored.state, stored.attempt, stored.worker_id) == ("active", 1, "w1")
    assert before <= stored.started_at <= after
    if is_postgres:
        # The test runs in one transaction: the database's CURRENT_TIMESTAMP, not Python's clock.
        assert stored.started_at == db_now()
    assert stored.lease_expires_at == stored.started_at + dt.timedelta(seconds=90)
    assert stored.deadline_at == stored.started_at + dt.timedelta(seconds=60)
    # The returned object mirrors what was stored.
    assert (claimed.state, claimed.attempt, claimed.started_at, claimed.lease_expires_at, claimed.deadline_at) == (
        stored.state, stored.attempt, stored.started_at, stored.lease_expires_at, stored.deadline_at)


def test_the_fetch_visibility_timeout_overrides_the_jobs_own(push):
    push(options={"visibility_timeout_ms": 90_000})
    [claimed] = Job.objects.fetch(["default"], visibility_timeout=dt.timedelta(seconds=5))
    stored = reload(claimed)
    assert stored.lease_expires_at - stored.started_at == dt.timedelta(seconds=5)


def test_a_job_without_timeout_has_no_deadline(push, ojs):
    ojs(DEFAULT_TIMEOUT=0)
    push()
    [claimed] = Job.objects.fetch(["default"])
    assert reload(claimed).deadline_at is None


def test_a_claim_without_worker_id_is_unowned(push):
    push()
    [claimed] = Job.objects.fetch(["default"])
    assert reload(claimed).worker_id is None


def test_only_available_jobs_are_claimed_even_when_others_are_due(push, claim):
    scheduled = push(options={"delay_until": "2999-01-01T00:00:00Z"})
    Job.objects.filter(pk=scheduled.pk).update(run_at=ago(hours=1))
    pending = push(options={"pending": True})
    active = claim()
    assert Job.objects.fetch(["default", active.queue], count=10) == []
    assert [reload(j).state for j in (scheduled, pending, active)] == ["scheduled", "pending", "active"]


def test_expired_jobs_are_discarded_not_run(push):
    expired = push(args=["expired"], expires_at="2001-01-01T00:00:00Z")
    fresh = push(args=["fresh"], options={"expires_at": "2999-01-01T00:00:00Z"})
    assert fetched_args(["default"]) == [["fresh"]]
    expired = reload(expired)
    assert (expired.state, expired.attempt, expired.started_at, expired.completed_at) == ("discarded", 0, None, None)
    assert expired.finished_at is not None
    assert expired.error["type"] == "enqueue_ttl_expired"
    assert history(expired) == [(0, "enqueue_ttl_expired")]
    assert event_types(expired) == ["job.enqueued", "job.expired"]
    assert reload(fresh).state == "active"


def test_expired_jobs_do_not_use_up_the_count(push):
    for index in range(3):
        push(args=[f"expired-{index}"], expires_at="2001-01-01T00:00:00Z")
    push(args=["first"])
    push(args=["second"])
    assert fetched_args(["default"], count=2) == [["first"], ["second"]]
    assert Job.objects.filter(state="discarded").count() == 3


def test_eight_threads_claim_each_of_10000_jobs_exactly_once(transactional_db, spec):
    """SKIP LOCKED on PostgreSQL; serialised IMMEDIATE transactions on SQLite (DESIGN invariant 10)."""
    total, threads_count = 10_000, 8
    for start in range(0, total, 1000):
        Job.objects.push_many([spec(args=[n], options={"queue": "race"}) for n in range(start, start + 1000)])
    claims: dict[str, list[str]] = {}

    def work(worker_id: str) -> None:
        mine = claims.setdefault(worker_id, [])
        while True:
            batch = Job.objects.fetch(["race"], count=25, worker_id=worker_id)
            mine.extend(str(job.id) for job in batch)
            # An empty answer may only mean "all the rest are locked by others".
            if not batch and not Job.objects.filter(queue="race", state="available").exists():
                return

    race([functools.partial(work, f"worker-{n}") for n in range(threads_count)])
    every_claim = [job_id for mine in claims.values() for job_id in mine]
    assert len(every_claim) == total
    assert len(set(every_claim)) == total
    # The store agrees: every job active once, owned by the thread that got it.
    owner_of = {job_id: worker for worker, mine in claims.items() for job_id in mine}
    stored = list(Job.objects.filter(queue="race").values_list("id", "state", "attempt", "worker_id"))
    assert Counter((state, attempt) for _, state, attempt, _ in stored) == {("active", 1): total}
    assert all(owner_of[str(job_id)] == worker for job_id, _, _, worker in stored)
    # The work was shared, not done by one thread while the others waited.
    assert sum(1 for mine in claims.values() if mine) > 1
    assert not JobError.objects.exists()
