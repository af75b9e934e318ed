"""CANCEL, ACTIVATE, and the dead letter's retry and purge through the core."""

from __future__ import annotations

import uuid

import pytest

from django_ojs.core.types import Lease
from django_ojs.models import Job, JobError, Worker
from django_ojs.protocol.errors import InvalidTransition, NotFound
from django_ojs.protocol.failure import Failure
from tests.helpers import history, reload


@pytest.fixture
def waiting_job(push, claim):
    def make(state: str) -> Job:
        if state == "scheduled":
            return push(options={"delay_until": "2999-01-01T00:00:00Z"})
        if state == "pending":
            return push(options={"pending": True})
        if state == "available":
            return push()
        job = claim("w1")
        if state == "retryable":
            Job.objects.fail(job.id, Failure(type="E", message=""))
        return reload(job)

    return make


@pytest.mark.parametrize("state", ["scheduled", "available", "pending", "retryable", "active"])
def test_cancel_moves_every_unfinished_job_to_cancelled(waiting_job, state):
    job = waiting_job(state)
    cancelled, previous = Job.objects.cancel(job.id)
    stored = reload(job)
    assert previous == state
    assert (stored.state, cancelled.state) == ("cancelled", "cancelled")
    assert stored.finished_at is not None
    assert (stored.run_at, stored.lease_expires_at, stored.deadline_at) == (None, None, None)
    # A cancelled job is never fetched.
    assert Job.objects.fetch([job.queue]) == []


def test_a_cancelled_active_job_cannot_be_finished_by_its_worker(waiting_job):
    job = waiting_job("active")
    Job.objects.cancel(job.id)
    with pytest.raises(InvalidTransition) as raised:
        Job.objects.ack(job.id, lease=Lease(worker_id="w1"))
    assert raised.value.current_state == "cancelled"
    with pytest.raises(InvalidTransition):
        Job.objects.fail(job.id, Failure(type="E", message=""), lease=Lease(worker_id="w1"))
    assert reload(job).state == "cancelled"


def test_cancel_twice_is_idempotent(push):
    job = push()
    Job.objects.cancel(job.id)
    finished_at = reload(job).finished_at
    again, previous = Job.objects.cancel(job.id)
    assert (again.state, previous, reload(job).finished_at) == ("cancelled", None, finished_at)


def test_activate_makes_a_pending_job_available_and_fetchable(push):
    job = push(options={"pending": True})
    activated = Job.objects.activate(job.id)
    stored = reload(job)
    assert (stored.state, activated.state) == ("available", "available")
    assert stored.enqueued_at is not None and stored.enqueued_at >= stored.created_at
    assert [j.id for j in Job.objects.fetch(["default"])] == [job.id]


@pytest.fixture
def dead_job(claim):
    """A dead-lettered job that failed on its only attempt."""
    job = claim("w1", options={"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}})
    Job.objects.fail(job.id, Failure(type="Fatal", message="gave up"))
    return reload(job)


def test_a_manual_retry_resets_the_attempts_clears_the_error_and_keeps_the_history(dead_job):
    retried = Job.objects.resurrect(dead_job.id)
    stored = reload(dead_job)
    assert (stored.state, stored.attempt, stored.releases, stored.error, stored.dead_letter) == (
        "available", 0, 0, None, False)
    assert (stored.started_at, stored.completed_at, stored.finished_at, stored.retry_delay_ms) == (None,) * 4
    assert stored.enqueued_at >= dead_job.finished_at
    assert retried.state == "available"
    assert history(stored) == [(1, "Fatal")]
    # The job gets its full set of attempts again.
    [again] = Job.objects.fetch([dead_job.queue], worker_id="w2")
    assert again.attempt == 1


def test_purge_deletes_a_discarded_job_and_its_history(dead_job):
    Job.objects.purge_dead(dead_job.id)
    assert not Job.objects.filter(pk=dead_job.pk).exists()
    assert not JobError.objects.exists()


@pytest.mark.parametrize("state", ["available", "active"])
def test_purge_refuses_a_job_that_is_not_in_the_dead_letter(waiting_job, state):
    job = waiting_job(state)
    with pytest.raises(NotFound):
        Job.objects.purge_dead(job.id)
    assert reload(job).state == state


@pytest.mark.parametrize("operation", [
    lambda job_id: Job.objects.cancel(job_id),
    lambda job_id: Job.objects.activate(job_id),
    lambda job_id: Job.objects.resurrect(job_id),
    lambda job_id: Job.objects.purge_dead(job_id),
    lambda job_id: Job.objects.discard(job_id),
    lambda job_id: Job.objects.ack(job_id),
    lambda job_id: Job.objects.fail(job_id, Failure(type="E", message="")),
], ids=["cancel", "activate", "manual retry", "purge", "discard", "ack", "fail"])
def test_an_operation_on_an_unknown_job_is_not_found(db, operation):
    job_id = uuid.uuid4()
    with pytest.raises(NotFound) as raised:
        operation(job_id)
    assert raised.value.details["resource_id"] == str(job_id)


def test_deregister_returns_the_jobs_a_worker_still_holds(claim):
    Worker.objects.register("w1")
    held = claim("w1")
    other = claim("w2")
    assert Worker.objects.deregister("w1") is True
    stored = reload(held)
    assert (stored.state, stored.worker_id, stored.attempt) == ("available", None, 1)
    assert history(stored) == [(1, "worker_death")]
    assert reload(other).state == "active"
    assert not Worker.objects.filter(id="w1").exists()


def test_deregister_of_an_unknown_worker_reports_it(db):
    assert Worker.objects.deregister("ghost") is False
