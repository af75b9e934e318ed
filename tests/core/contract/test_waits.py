"""Snooze, waits and signals through the core (docs/how-to/snooze-signals-timers.md), on every engine."""

from __future__ import annotations

import datetime as dt

import pytest

from django_ojs.core.types import Lease
from django_ojs.models import Job, JobError
from django_ojs.protocol.errors import InvalidRequest, InvalidTransition, NotFound
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.waits import delay
from tests.helpers import ago, event_types, reload, update

HOUR = dt.timedelta(hours=1)


def wake(job: Job) -> Job:
    """Make a parked job due and let the reaper's promotion take it."""
    update(job, run_at=ago(seconds=1))
    assert Job.objects.promote_due(10) >= 1
    return reload(job)


def reclaim(job: Job, worker_id: str = "w1") -> Job:
    [claimed] = Job.objects.fetch([job.queue], worker_id=worker_id)
    assert claimed.id == job.id
    return claimed


def test_a_snooze_parks_the_job_for_later_with_no_error_and_no_attempt_charged(claim):
    job = claim("w1")
    snoozed = Job.objects.snooze(job.id, dt.timedelta(seconds=30), lease=Lease("w1", 1))
    stored = reload(snoozed)
    assert (stored.state, stored.worker_id, stored.lease_expires_at, stored.attempt) == ("scheduled", None, None, 1)
    assert (stored.snoozes, stored.releases, stored.error) == (1, 1, None)
    assert dt.timedelta(seconds=29) < stored.run_at - job.started_at < dt.timedelta(seconds=31)
    assert not JobError.objects.filter(job=stored).exists()
    assert event_types(stored)[-1] == "job.snoozed"


def test_snoozes_never_spend_the_retry_policys_attempts(claim):
    job = claim("w1", options={"retry": {"max_attempts": 2}})
    for _ in range(3):
        Job.objects.snooze(job.id, dt.timedelta(seconds=5), lease=Lease("w1", job.attempt))
        job = reclaim(wake(job))
    # Four executions so far, three of them snoozed: this failure is the first charged one.
    failed = Job.objects.fail(job.id, Failure(type="E", message="boom"), lease=Lease("w1", job.attempt))
    assert (failed.state, failed.attempt, failed.snoozes) == ("retryable", 4, 3)


def test_a_snooze_from_a_stale_attempt_is_refused_and_changes_nothing(claim):
    job = claim("w1")
    Job.objects.snooze(job.id, dt.timedelta(seconds=5), lease=Lease("w1", 1))
    again = reclaim(wake(job))
    assert again.attempt == 2
    with pytest.raises(InvalidTransition):
        Job.objects.snooze(job.id, dt.timedelta(seconds=5), lease=Lease("w1", 1))
    assert (reload(job).state, reload(job).snoozes) == ("active", 1)


def test_a_snooze_of_a_job_not_running_is_refused(push):
    job = push()
    with pytest.raises(InvalidTransition):
        Job.objects.snooze(job.id, dt.timedelta(seconds=5))
    assert reload(job).state == "available"


def test_the_snooze_beyond_max_snoozes_fails_the_job_with_a_clear_error(claim, ojs):
    ojs(MAX_SNOOZES=1)
    job = claim("w1", options={"retry": {"max_attempts": 5}})
    Job.objects.snooze(job.id, dt.timedelta(seconds=5), lease=Lease("w1", 1))
    job = reclaim(wake(job))
    ended = Job.objects.snooze(job.id, dt.timedelta(seconds=5), lease=Lease("w1", 2))
    assert (ended.state, ended.error["type"], ended.snoozes) == ("discarded", "snooze_limit", 1)
    assert "MAX_SNOOZES" in ended.error["message"]


def test_a_wait_parks_the_job_and_its_signal_wakes_it_with_the_payload(claim):
    job = claim("w1")
    _, outcome = Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1))
    assert outcome.parked and not outcome.delivered
    parked = reload(job)
    assert (parked.state, parked.waiting_for, parked.releases, parked.snoozes) == ("scheduled", "approved", 1, 0)
    assert parked.waits["approved"]["until"]
    signalled = Job.objects.signal(job.id, "approved", {"by": "ann"})
    assert (signalled.state, reload(job).waiting_for) == ("available", None)
    again = reclaim(job)
    _, outcome = Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", again.attempt))
    assert (outcome.delivered, outcome.payload) == (True, {"by": "ann"})
    assert {"job.waiting", "job.signalled"} <= set(event_types(job))


def test_a_signal_sent_before_the_wait_is_returned_at_once(claim):
    job = claim("w1")
    Job.objects.signal(job.id, "approved", 7)
    assert reload(job).state == "active"  # stored; a running job is not moved
    _, outcome = Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1))
    assert (outcome.delivered, outcome.payload, reload(job).state) == (True, 7, "active")


def test_a_wait_past_its_deadline_times_out_and_keeps_its_first_deadline(claim):
    job = claim("w1")
    Job.objects.wait(job.id, "approved", dt.timedelta(seconds=60), lease=Lease("w1", 1))
    first_until = reload(job).waits["approved"]["until"]
    job = reclaim(wake(job))  # the deadline came: the reaper promoted it
    # The re-run's wait keeps the first deadline, whatever timeout it asks now.
    _, outcome = Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", job.attempt))
    assert outcome.parked and reload(job).waits["approved"]["until"] == first_until
    update(job, waits={"approved": {"since": "2020-01-01T00:00:00Z", "until": "2020-01-01T00:01:00Z"}})
    job = reclaim(wake(job))
    _, outcome = Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", job.attempt))
    assert (outcome.timed_out, outcome.parked, reload(job).state) == (True, False, "active")


def test_a_signal_for_another_name_is_stored_without_waking_the_job(claim):
    job = claim("w1")
    Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1))
    Job.objects.signal(job.id, "other", None)
    stored = reload(job)
    assert (stored.state, stored.waiting_for, sorted(stored.signals)) == ("scheduled", "approved", ["other"])


def test_a_second_signal_of_a_name_is_refused_and_the_first_kept(push):
    job = push()
    Job.objects.signal(job.id, "approved", 1)
    with pytest.raises(InvalidTransition, match="already has signal"):
        Job.objects.signal(job.id, "approved", 2)
    assert reload(job).signals["approved"]["payload"] == 1


def test_a_signal_to_a_finished_job_is_refused_and_changes_nothing(claim):
    job = claim("w1")
    Job.objects.ack(job.id)
    with pytest.raises(InvalidTransition, match="cannot signal"):
        Job.objects.signal(job.id, "approved", 1)
    assert not reload(job).signals


def test_a_signal_to_no_job_is_not_found(db):
    with pytest.raises(NotFound):
        Job.objects.signal("019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "approved")


def test_a_cancelled_parked_job_takes_no_signal(claim):
    job = claim("w1")
    Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1))
    Job.objects.cancel(job.id)
    with pytest.raises(InvalidTransition):
        Job.objects.signal(job.id, "approved")
    assert reload(job).state == "cancelled"


def test_delays_are_bounded():
    for bad in (0, -1, True, "5", float("nan"), 10**9):
        with pytest.raises(InvalidRequest):
            delay(bad)
    assert delay(1.5) == dt.timedelta(seconds=1.5)
