"""ACK through the core: Job.objects.ack and ack_many (ojs-core §7.3, ojs-worker-protocol §5.6)."""

from __future__ import annotations

import pytest

from django_ojs.core.types import Lease
from django_ojs.models import Job
from django_ojs.protocol.errors import InvalidTransition
from django_ojs.protocol.failure import Failure
from tests.helpers import ago, reload, row, update


def test_ack_completes_the_job_and_stores_the_result(claim):
    job = claim("w1")
    acked = Job.objects.ack(job.id, result={"delivered": True}, lease=Lease(worker_id="w1"))
    stored = reload(job)
    assert (stored.state, stored.result) == ("completed", {"delivered": True})
    assert stored.completed_at == stored.finished_at is not None
    assert stored.completed_at >= stored.started_at
    assert (stored.lease_expires_at, stored.deadline_at) == (None, None)
    assert (acked.state, acked.result) == ("completed", {"delivered": True})


@pytest.mark.parametrize("result", [None, 0, "", [], [1, "two"], "text"])
def test_any_json_result_is_stored_as_given(claim, result):
    job = claim()
    Job.objects.ack(job.id, result=result)
    assert reload(job).result == result


def test_ack_clears_the_error_of_an_earlier_attempt(claim):
    job = claim("w1", options={"retry": {"max_attempts": 2, "jitter": False}})
    Job.objects.fail(job.id, Failure(type="Flaky", message="first try"))
    update(job, state="available", run_at=None)
    [again] = Job.objects.fetch([job.queue], worker_id="w1")
    assert again.error["type"] == "Flaky"
    Job.objects.ack(job.id)
    stored = reload(job)
    assert (stored.state, stored.error, stored.attempt) == ("completed", None, 2)
    assert stored.errors.count() == 1  # the history is kept


def test_a_reservation_owned_by_another_worker_cannot_be_acked(claim):
    job = claim("owner")
    before = row(job)
    with pytest.raises(InvalidTransition) as raised:
        Job.objects.ack(job.id, result="stolen", lease=Lease(worker_id="intruder"))
    assert raised.value.current_state == "active"
    assert raised.value.details["worker_id"] == "owner"
    assert row(job) == before
    Job.objects.ack(job.id, result="mine", lease=Lease(worker_id="owner"))
    assert (reload(job).state, reload(job).result) == ("completed", "mine")


def test_an_ack_without_worker_id_is_accepted_as_the_sdks_send_it(claim):
    job = claim("w1")
    Job.objects.ack(job.id)
    assert reload(job).state == "completed"


def test_an_unowned_claim_can_be_acked_by_any_worker(claim):
    job = claim(None)
    Job.objects.ack(job.id, lease=Lease(worker_id="w9"))
    assert reload(job).state == "completed"


def test_an_ack_for_an_older_attempt_is_refused_after_the_job_was_reaped_and_claimed_again(claim):
    job = claim("w1", options={"retry": {"max_attempts": 5}})
    update(job, lease_expires_at=ago(seconds=1))
    assert Job.objects.requeue_lapsed(10) == 1
    [again] = Job.objects.fetch([job.queue], worker_id="w1")
    assert again.attempt == 2
    with pytest.raises(InvalidTransition):
        Job.objects.ack(job.id, lease=Lease(worker_id="w1", attempt=1))
    assert reload(job).state == "active"
    Job.objects.ack(job.id, lease=Lease(worker_id="w1", attempt=2))
    assert reload(job).state == "completed"


def test_the_old_owner_cannot_ack_a_job_reaped_and_claimed_by_another_worker(claim):
    job = claim("w1")
    update(job, lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    Job.objects.fetch([job.queue], worker_id="w2")
    with pytest.raises(InvalidTransition) as raised:
        Job.objects.ack(job.id, lease=Lease(worker_id="w1"))
    assert raised.value.details["worker_id"] == "w2"
    assert (reload(job).state, reload(job).worker_id) == ("active", "w2")


def test_a_reaped_job_cannot_be_acked_by_its_old_owner(claim):
    job = claim("w1")
    update(job, lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    with pytest.raises(InvalidTransition) as raised:
        Job.objects.ack(job.id, lease=Lease(worker_id="w1"))
    assert raised.value.current_state == "available"


def test_a_double_ack_is_refused_and_keeps_the_first_result(claim):
    job = claim()
    Job.objects.ack(job.id, result=1)
    with pytest.raises(InvalidTransition) as raised:
        Job.objects.ack(job.id, result=2)
    assert raised.value.current_state == "completed"
    assert reload(job).result == 1
