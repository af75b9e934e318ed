"""Every invalid transition of ojs-core §6.4 is refused by the core, and changes nothing.

Jobs are brought into each state through the core's own operations, then
every operation that may not leave that state is tried.
"""

from __future__ import annotations

import pytest

from django_ojs.core.types import Lease
from django_ojs.models import Job, JobError
from django_ojs.protocol.errors import InvalidTransition
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.states import TERMINAL, JobState
from tests.helpers import ago, row, update

ALL_STATES = [state.value for state in JobState]


@pytest.fixture
def job_in(push, claim):
    """``job_in("retryable")``: a job brought into that state by core operations."""

    def make(state: str) -> Job:
        if state == "scheduled":
            return push(options={"delay_until": "2999-01-01T00:00:00Z"})
        if state == "available":
            return push()
        if state == "pending":
            return push(options={"pending": True})
        job = claim("w1", options={"retry": {"max_attempts": 1 if state == "discarded" else 3}})
        if state == "completed":
            Job.objects.ack(job.id)
        elif state in ("retryable", "discarded"):
            Job.objects.fail(job.id, Failure(type="E", message=""))
        elif state == "cancelled":
            Job.objects.cancel(job.id)
        job.refresh_from_db()
        assert job.state == state
        return job

    return make


def refused(job: Job, attempt) -> InvalidTransition:
    """Run a move that must be refused; check it changed nothing and say why it was refused."""
    before = row(job)
    errors_before = JobError.objects.count()
    with pytest.raises(InvalidTransition) as raised:
        attempt()
    assert row(job) == before
    assert JobError.objects.count() == errors_before
    assert raised.value.current_state == job.state
    assert raised.value.job_id == str(job.id)
    return raised.value


def _fail(job: Job, **kwargs):
    return Job.objects.fail(job.id, Failure(type="E", message=""), **kwargs)


# Each operation, the only states it may leave (states.py), and how to attempt it.
OPERATIONS = {
    "ack": ({"active"}, lambda job: Job.objects.ack(job.id, result="x")),
    "fail": ({"active"}, _fail),
    "release": ({"active"}, lambda job: _fail(job, requeue=True)),
    "activate": ({"pending"}, lambda job: Job.objects.activate(job.id)),
    "manual retry": ({"discarded"}, lambda job: Job.objects.resurrect(job.id)),
    "operator discard": ({"scheduled", "available", "pending", "retryable"}, lambda job: Job.objects.discard(job.id)),
}


@pytest.mark.parametrize(
    ("operation", "state"),
    [(name, state) for name, (allowed, _) in OPERATIONS.items() for state in ALL_STATES if state not in allowed],
)
def test_an_operation_from_a_state_it_may_not_leave_is_refused(job_in, operation, state):
    allowed, attempt = OPERATIONS[operation]
    job = job_in(state)
    error = refused(job, lambda: attempt(job))
    assert error.details["expected_state"] == sorted(allowed)


@pytest.mark.parametrize("state", ["scheduled", "available", "pending", "retryable"])
def test_an_operator_discard_of_a_waiting_job_is_allowed(job_in, state):
    job = job_in(state)
    Job.objects.discard(job.id)
    job.refresh_from_db()
    assert job.state == "discarded" and job.finished_at is not None


@pytest.mark.parametrize("state", [s for s in ALL_STATES if s != "available"])
def test_fetch_claims_only_available_jobs(job_in, state):
    job = job_in(state)
    if state in ("scheduled", "retryable"):
        # Even when due: the claim never promotes; the reaper does (scheduled -> active is invalid).
        job = update(job, run_at=ago(hours=1))
    before = row(job)
    assert Job.objects.fetch([job.queue], count=10, worker_id="w2") == []
    assert row(job) == before


@pytest.mark.parametrize("state", sorted(s.value for s in TERMINAL))
def test_cancel_of_a_finished_job_succeeds_and_changes_nothing(job_in, state):
    # ojs-core §7.6 rule 4: idempotent, no error (the team's decision over the binding's 409).
    job = job_in(state)
    before = row(job)
    cancelled, previous = Job.objects.cancel(job.id)
    assert previous is None
    assert cancelled.state == state
    assert row(job) == before


@pytest.mark.parametrize("state", [s for s in ALL_STATES if s not in ("scheduled", "retryable")])
def test_promotion_never_touches_a_job_that_is_not_waiting_for_a_timer(job_in, state):
    job = update(job_in(state), run_at=ago(hours=1))
    before = row(job)
    assert Job.objects.promote_due(10) == 0
    assert row(job) == before


def test_the_refusal_of_a_lease_mismatch_names_the_holder(job_in):
    job = job_in("active")
    error = refused(job, lambda: Job.objects.ack(job.id, lease=Lease(worker_id="w2")))
    assert (error.details["worker_id"], error.details["attempt"]) == ("w1", 1)
