"""Reaper loops that only time moves: promote_due and expire_overdue."""

from __future__ import annotations

import pytest

from django_ojs.core.clock import db_now
from django_ojs.models import Job
from django_ojs.protocol.failure import Failure
from tests.helpers import ago, history, later, reload, update


@pytest.fixture
def retryable(claim):
    def make():
        job = claim(options={"retry": {"max_attempts": 3}})
        Job.objects.fail(job.id, Failure(type="E", message=""))
        return reload(job)

    return make


@pytest.fixture
def scheduled(push):
    return lambda: push(options={"delay_until": "2999-01-01T00:00:00Z"})


@pytest.mark.parametrize("kind", ["scheduled", "retryable"])
def test_a_timed_job_becomes_available_when_due_and_not_before(request, kind):
    job = request.getfixturevalue(kind)()
    update(job, run_at=later(seconds=5))
    assert Job.objects.promote_due(10) == 0
    assert reload(job).state == kind
    update(job, run_at=ago(milliseconds=1))
    assert Job.objects.promote_due(10) == 1
    stored = reload(job)
    assert (stored.state, stored.run_at) == ("available", None)
    assert stored.enqueued_at >= stored.created_at
    assert [j.id for j in Job.objects.fetch([job.queue])] == [job.id]


@pytest.mark.postgres
def test_a_job_due_exactly_now_is_promoted(scheduled):
    # PostgreSQL only: its clock stands still within the test's transaction. SQLite's
    # moves on, and compares text timestamps to the millisecond.
    job = update(scheduled(), run_at=db_now())
    assert Job.objects.promote_due(10) == 1
    assert reload(job).state == "available"


def test_promotion_moves_at_most_the_limit_oldest_first(scheduled):
    jobs = [update(scheduled(), run_at=ago(seconds=30 - n)) for n in range(5)]
    assert Job.objects.promote_due(2) == 2
    assert [reload(j).state for j in jobs] == ["available"] * 2 + ["scheduled"] * 3
    assert Job.objects.promote_due(10) == 3


@pytest.mark.parametrize("state", ["scheduled", "available", "pending", "retryable"])
def test_a_waiting_job_past_expires_at_is_discarded_unrun(request, push, state):
    if state == "available":
        job = push()
    elif state == "pending":
        job = push(options={"pending": True})
    else:
        job = request.getfixturevalue(state)()
    job = update(job, expires_at=ago(seconds=1))
    attempt = job.attempt
    assert Job.objects.expire_overdue(10) == 1
    stored = reload(job)
    assert (stored.state, stored.attempt, stored.completed_at, stored.run_at) == ("discarded", attempt, None, None)
    assert stored.finished_at is not None
    assert stored.error["type"] == "enqueue_ttl_expired"
    assert history(stored)[-1] == (attempt, "enqueue_ttl_expired")


def test_a_job_not_yet_expired_is_left_alone(push):
    job = push(options={"expires_at": "+PT1H"})
    assert Job.objects.expire_overdue(10) == 0
    assert reload(job).state == "available"


def test_a_running_job_does_not_expire(claim):
    # expires_at bounds the wait before a start; a started job is governed by its timeout.
    job = update(claim(), expires_at=ago(seconds=1))
    assert Job.objects.expire_overdue(10) == 0
    assert reload(job).state == "active"


def test_expiry_moves_at_most_the_limit(push):
    for _ in range(3):
        push(expires_at="2001-01-01T00:00:00Z")
    assert Job.objects.expire_overdue(2) == 2
    assert Job.objects.expire_overdue(2) == 1
    assert Job.objects.filter(state="discarded").count() == 3
