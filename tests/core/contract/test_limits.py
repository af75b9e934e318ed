"""Rate and concurrency limits at FETCH, in the store (ojs-rate-limiting §5, §6, §8)."""

from __future__ import annotations

import pytest

from django_ojs.core import limits, queue_config
from django_ojs.models import Job, RateLimitStart
from tests.helpers import ago, event_types, race, reload

pytestmark = pytest.mark.django_db(transaction=True)


def limited(push, queue="rl", **policy):
    return push(type="rl.job", options={"queue": queue, "rate_limit": {"key": "api", **policy}})


def test_a_held_job_is_skipped_and_the_next_eligible_one_is_claimed(push):
    first = limited(push, concurrency=1, queue="mixed")
    held = limited(push, concurrency=1, queue="mixed")
    plain = push(type="plain.job", options={"queue": "mixed"})
    report = limits.LimitReport()
    claimed = Job.objects.fetch(["mixed"], count=3, limit_report=report)
    assert [job.id for job in claimed] == [first.id, plain.id]
    assert reload(held).state == "available" and report.key == "api" and report.remaining == 0
    assert "rate_limit.exceeded" in event_types()


def test_a_throttle_spaces_starts(push):
    jobs = [limited(push, throttle={"limit": 2, "period": "PT2M"}) for _ in range(3)]
    assert len(Job.objects.fetch(["rl"], count=3)) == 1
    report = limits.LimitReport()
    assert Job.objects.fetch(["rl"], count=3, limit_report=report) == []
    assert 55 < report.seconds_to_wait(1.0) <= 60
    RateLimitStart.objects.update(started_at=ago(seconds=61))
    assert len(Job.objects.fetch(["rl"], count=3)) == 1
    assert sorted(j.state for j in map(reload, jobs)) == ["active", "active", "available"]


def test_on_limit_drop_discards_and_reschedule_defers(push):
    limited(push, concurrency=1, on_limit="drop")
    dropped = limited(push, concurrency=1, on_limit="drop")
    Job.objects.fetch(["rl"], count=2)
    dropped = reload(dropped)
    assert dropped.state == "discarded" and dropped.error["type"] == "rate_limited"
    assert "rate_limit.dropped" in event_types()

    push(type="w.job", options={"queue": "w", "rate_limit": {"key": "w", "rate": {"limit": 1, "period": "PT1M"},
                                                              "on_limit": "reschedule"}})
    deferred = push(type="w.job", options={"queue": "w", "rate_limit": {"key": "w", "rate": {"limit": 1, "period": "PT1M"},
                                                                         "on_limit": "reschedule"}})
    Job.objects.fetch(["w"], count=2)
    deferred = reload(deferred)
    assert deferred.state == "scheduled" and 55 <= (deferred.run_at - deferred.created_at).total_seconds() <= 61


def test_a_rescheduled_job_does_not_claim_a_key_it_had_left(push):
    policy = {"key": "w", "rate": {"limit": 1, "period": "PT1M"}, "on_limit": "reschedule"}
    push(type="w.job", options={"queue": "w", "rate_limit": policy})
    once = push(type="w.job", args=[1], options={"queue": "w", "rate_limit": policy,
                                                 "unique": {"keys": ["args"], "states": ["scheduled"]}})
    Job.objects.fetch(["w"], count=2)
    assert reload(once).state == "scheduled" and reload(once).unique_states is None


def test_an_expired_override_no_longer_applies(push):
    limited(push, concurrency=5)
    limits.set_override("api", {"concurrency": 0}, ago(seconds=1))
    assert len(Job.objects.fetch(["rl"])) == 1


def test_queue_and_job_limits_both_bind(push):
    queue_config.update("both", {"concurrency": 1})
    push(type="plain.job", options={"queue": "both"})
    push(type="plain.job", options={"queue": "both"})
    assert len(Job.objects.fetch(["both"], count=2)) == 1
    assert Job.objects.fetch(["both"], count=2) == []


def test_starts_are_pruned_once_no_window_reaches_them(push):
    limited(push, rate={"limit": 5, "period": "PT1S"})
    Job.objects.fetch(["rl"])
    assert limits.prune_starts(ago(seconds=0), 100) == 0
    RateLimitStart.objects.update(expires_at=ago(seconds=1))
    assert Job.objects.prune(100)["rate_limit_starts"] == 1


@pytest.mark.postgres
def test_concurrent_fetches_never_exceed_a_concurrency_limit(push):
    for _ in range(40):
        limited(push, concurrency=3)
    race([lambda: Job.objects.fetch(["rl"], count=2) for _ in range(12)])
    # A FETCH that finds the limit being decided by another one skips it (a
    # try-lock never waits), so the race may leave a slot unused; never more.
    assert Job.objects.filter(state="active").count() <= 3
    while Job.objects.fetch(["rl"], count=2):
        pass
    assert Job.objects.filter(state="active").count() == 3
