"""Reaper loops for active jobs: requeue_lapsed (visibility timeout) and fail_timed_out."""

from __future__ import annotations

import datetime as dt

import pytest

from django_ojs.models import Job, JobError
from tests.helpers import ago, event_types, history, later, reload, update


def lapse(job):
    return update(job, lease_expires_at=ago(seconds=1))


def time_out(job):
    return update(job, deadline_at=ago(seconds=1))


def test_a_lapsed_lease_returns_the_job_to_available_without_charging_again(claim):
    job = lapse(claim("w1", options={"retry": {"max_attempts": 3}}))
    assert Job.objects.requeue_lapsed(10) == 1
    stored = reload(job)
    assert (stored.state, stored.attempt, stored.worker_id, stored.started_at) == ("available", 1, None, None)
    assert (stored.lease_expires_at, stored.deadline_at, stored.run_at) == (None, None, None)
    assert stored.error["type"] == "visibility_timeout" and "w1" in stored.error["message"]
    assert history(stored) == [(1, "visibility_timeout")]
    # The claim is where the attempt is counted: the next run is attempt 2.
    [again] = Job.objects.fetch([job.queue], worker_id="w2")
    assert again.attempt == 2


def test_a_lease_still_running_is_left_alone(claim):
    job = update(claim(), lease_expires_at=later(seconds=30))
    assert Job.objects.requeue_lapsed(10) == 0
    assert reload(job).state == "active"


@pytest.mark.parametrize(("on_exhaustion", "dead_letter"), [("discard", False), ("dead_letter", True)])
def test_a_lapsed_lease_on_the_last_attempt_discards_per_the_policy(claim, on_exhaustion, dead_letter):
    job = lapse(claim(options={"retry": {"max_attempts": 1, "on_exhaustion": on_exhaustion}}))
    Job.objects.requeue_lapsed(10)
    stored = reload(job)
    assert (stored.state, stored.dead_letter, stored.attempt) == ("discarded", dead_letter, 1)
    assert stored.completed_at == stored.finished_at is not None
    assert history(stored) == [(1, "visibility_timeout")]
    assert event_types(stored)[-2:] == ["job.failed", "job.discarded"]


def test_a_job_that_keeps_lapsing_is_discarded_after_max_attempts(claim):
    job = claim("w1", options={"retry": {"max_attempts": 3}})
    for attempt in (1, 2, 3):
        lapse(job)
        Job.objects.requeue_lapsed(10)
        if attempt < 3:
            [job] = Job.objects.fetch([job.queue], worker_id="w1")
    assert reload(job).state == "discarded"
    assert history(job) == [(1, "visibility_timeout"), (2, "visibility_timeout"), (3, "visibility_timeout")]


def test_lapsed_leases_move_at_most_the_limit(claim):
    jobs = [lapse(claim()) for _ in range(3)]
    assert Job.objects.requeue_lapsed(2) == 2
    assert Job.objects.requeue_lapsed(2) == 1
    assert {reload(j).state for j in jobs} == {"available"}


def test_a_job_past_its_execution_timeout_fails_with_type_timeout_and_retries(claim):
    job = time_out(claim("w1", options={"timeout_ms": 2000, "retry": {"max_attempts": 3, "jitter": False,
                                                                       "initial_interval": "PT4S"}}))
    assert Job.objects.fail_timed_out(10) == 1
    stored = reload(job)
    assert (stored.state, stored.retry_delay_ms, stored.worker_id) == ("retryable", 4000, None)
    assert stored.error["type"] == "timeout"
    assert stored.error["details"]["limit_seconds"] == 2
    entry = JobError.objects.get(job_id=job.pk)
    assert (entry.attempt, entry.type) == (1, "timeout")
    assert stored.run_at == entry.occurred_at + dt.timedelta(seconds=4)


@pytest.mark.parametrize(
    ("retry", "dead_letter"),
    [
        ({"max_attempts": 1}, False),
        ({"max_attempts": 1, "on_exhaustion": "dead_letter"}, True),
        ({"max_attempts": 5, "non_retryable_errors": ["timeout"]}, False),
    ],
)
def test_a_timeout_follows_the_retry_policy_to_the_end(claim, retry, dead_letter):
    job = time_out(claim(options={"timeout_ms": 1000, "retry": retry}))
    Job.objects.fail_timed_out(10)
    assert (reload(job).state, reload(job).dead_letter) == ("discarded", dead_letter)


def test_a_job_within_its_timeout_or_without_one_is_left_alone(claim, ojs):
    within = update(claim(options={"timeout_ms": 60_000}), deadline_at=later(seconds=30))
    ojs(DEFAULT_TIMEOUT=0)
    unlimited = update(claim(), started_at=ago(days=30))
    assert reload(unlimited).deadline_at is None
    assert Job.objects.fail_timed_out(10) == 0
    assert [reload(within).state, reload(unlimited).state] == ["active", "active"]
