"""Durable jobs in the core: checkpoints outlive their attempt, steps are recorded once, on a live lease."""

from __future__ import annotations

import pytest

from django_ojs.core.durable import record_step, steps_by_job, steps_of
from django_ojs.core.progress import report_progress
from django_ojs.core.types import Lease
from django_ojs.models import Event, Job, JobStep
from django_ojs.protocol.errors import InvalidTransition, NotFound
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.progress import make
from tests.helpers import ago, reload, update

pytestmark = pytest.mark.django_db(transaction=True)


def fail(job, worker_id="w1"):
    Job.objects.fail(job.id, Failure(type="Boom", message="x"), lease=Lease(worker_id=worker_id, attempt=job.attempt))


def retry_now(job):
    update(job, run_at=ago(seconds=1))
    Job.objects.promote_due(10)
    [again] = Job.objects.fetch([job.queue], worker_id="w2")
    return again


def test_a_checkpoint_outlives_its_failed_attempt_and_reaches_the_retry(claim):
    job = claim("w1", options={"retry": {"max_attempts": 3, "initial_interval": "PT1S"}})
    assert report_progress(job.id, make(0.7, checkpoint={"offset": 70}), attempt=1, worker_id="w1")
    fail(job)
    stored = reload(job)
    assert stored.state == "retryable"
    assert stored.checkpoint["state"] == {"offset": 70} and stored.checkpoint["attempt"] == 1
    again = retry_now(job)
    assert again.attempt == 2
    assert again.checkpoint["state"] == {"offset": 70}
    # Progress starts afresh (ojs-progress §5.3); the checkpoint does not.
    assert report_progress(job.id, make(0.1), attempt=2, worker_id="w2")
    assert reload(job).checkpoint["state"] == {"offset": 70}


def test_a_checkpoint_from_an_attempt_that_lost_its_lease_is_refused(claim):
    job = claim("w1", options={"retry": {"max_attempts": 3}})
    update(job, lease_expires_at=ago(seconds=1))
    assert Job.objects.requeue_lapsed(10) == 1
    assert not report_progress(job.id, make(checkpoint={"offset": 1}), attempt=1, worker_id="w1")
    [again] = Job.objects.fetch([job.queue], worker_id="w2")
    assert not report_progress(job.id, make(checkpoint={"offset": 1}), attempt=1, worker_id="w1")
    assert reload(again).checkpoint is None


def test_a_checkpoint_alone_extends_the_lease_and_records_no_progress(claim):
    job = claim("w1")
    update(job, lease_expires_at=job.started_at)
    assert report_progress(job.id, make(checkpoint={"page": 3}), attempt=1, worker_id="w1")
    stored = reload(job)
    assert stored.lease_expires_at > job.started_at
    assert stored.progress is None
    assert not Event.objects.filter(type="job.progress", job_id=job.id).exists()


def test_a_step_is_recorded_once_per_name_and_a_retry_reads_it(claim):
    job = claim("w1", options={"retry": {"max_attempts": 3, "initial_interval": "PT1S"}})
    step, new = record_step(job.id, "charge", {"charge_id": "ch_1"}, attempt=1, worker_id="w1")
    assert new and (step.name, step.attempt, step.result) == ("charge", 1, {"charge_id": "ch_1"})
    again, new = record_step(job.id, "charge", {"charge_id": "ch_2"}, attempt=1, worker_id="w1")
    assert not new and again.result == {"charge_id": "ch_1"}
    assert reload(job).step_count == 1
    assert Event.objects.filter(type="job.step_completed", job_id=job.id).count() == 1
    fail(job)
    retried = retry_now(job)
    assert retried.step_count == 1
    assert [(s.name, s.attempt) for s in steps_by_job([retried])[retried.seq]] == [("charge", 1)]
    record_step(job.id, "ship", None, attempt=2, worker_id="w2")
    assert [(s.name, s.attempt) for s in steps_of(reload(job))] == [("charge", 1), ("ship", 2)]


def test_a_step_from_a_stale_attempt_records_nothing(claim, push):
    job = claim("w1", options={"retry": {"max_attempts": 3}})
    with pytest.raises(InvalidTransition):
        record_step(job.id, "a", 1, attempt=2, worker_id="w1")
    with pytest.raises(InvalidTransition):
        record_step(job.id, "a", 1, attempt=1, worker_id="w2")
    update(job, lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    with pytest.raises(InvalidTransition) as refused:
        record_step(job.id, "a", 1, attempt=1, worker_id="w1")
    assert refused.value.current_state == "available"
    waiting = push()
    with pytest.raises(InvalidTransition):
        record_step(waiting.id, "a", 1, attempt=1)
    with pytest.raises(NotFound):
        record_step("019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "a", 1, attempt=1)
    assert not JobStep.objects.exists() and reload(job).step_count == 0


def test_steps_are_deleted_with_their_job_by_purge_and_by_retention(claim):
    purged = claim("w1", options={"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}})
    record_step(purged.id, "a", 1, attempt=1, worker_id="w1")
    fail(purged)
    Job.objects.purge_dead(purged.id)
    assert not JobStep.objects.filter(job_id=purged.seq).exists()
    pruned = claim("w1")
    record_step(pruned.id, "a", 1, attempt=1, worker_id="w1")
    Job.objects.ack(pruned.id, lease=Lease(worker_id="w1", attempt=1))
    update(pruned, finished_at=ago(days=400))
    Job.objects.prune(100)
    assert not Job.objects.filter(seq=pruned.seq).exists()
    assert not JobStep.objects.exists()
