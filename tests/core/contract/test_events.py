"""Lifecycle events (ojs-events) are written in the transaction of the move they record."""

from __future__ import annotations

import pytest
from django.db import transaction

from django_ojs.models import Event, Job, Queue, Worker
from django_ojs.protocol.failure import Failure
from tests.helpers import ago, event_types, update


def data_of(job, kind):
    return Event.objects.get(job_id=job.id, type=kind).data


def test_push_records_job_enqueued(push):
    job = push(type="email.send", priority=5, options={"queue": "email"})
    event = Event.objects.get(job_id=job.id)
    assert (event.type, event.queue, event.time) == ("job.enqueued", "email", job.created_at)
    assert event.data == {"job_id": str(job.id), "job_type": "email.send", "queue": "email", "state": "available",
                          "attempt": 0, "priority": 5}


def test_a_job_records_job_enqueued_each_time_it_enters_available(push, claim):
    """ojs-events §3.1: job.enqueued marks entry into ``available``, whatever the way in."""
    scheduled = push(scheduled_at="2999-01-01T00:00:00Z")
    assert event_types(scheduled) == ["job.scheduled"]
    assert data_of(scheduled, "job.scheduled")["scheduled_at"] == "2999-01-01T00:00:00.000Z"
    update(scheduled, run_at=ago(seconds=1))
    Job.objects.promote_due(10)
    assert event_types(scheduled) == ["job.scheduled", "job.enqueued"]

    pending = push(options={"pending": True})
    assert event_types(pending) == []
    Job.objects.activate(pending.id)
    assert event_types(pending) == ["job.enqueued"]

    lapsed = update(claim(), lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    assert event_types(lapsed)[-2:] == ["job.failed", "job.enqueued"]
    assert data_of(lapsed, "job.failed")["error"]["type"] == "visibility_timeout"


def test_fetch_records_job_started_with_the_worker(claim):
    job = claim("w1")
    assert event_types(job) == ["job.enqueued", "job.started"]
    assert data_of(job, "job.started")["worker_id"] == "w1"
    assert data_of(job, "job.started")["attempt"] == 1


def test_ack_records_job_completed_with_its_duration(claim):
    job = update(claim(), started_at=ago(seconds=2))
    Job.objects.ack(job.id)
    assert event_types(job)[-1] == "job.completed"
    duration = data_of(job, "job.completed")["duration_ms"]
    assert 2000 <= duration < 60_000


def test_a_retried_failure_records_failed_then_retrying(claim):
    job = claim(options={"retry": {"max_attempts": 2, "jitter": False}})
    Job.objects.fail(job.id, Failure(type="Smtp", code="handler_error", message="refused"))
    assert event_types(job)[-2:] == ["job.failed", "job.retrying"]
    assert data_of(job, "job.failed")["state"] == "retryable"
    assert data_of(job, "job.failed")["error"]["message"] == "refused"
    retrying = data_of(job, "job.retrying")
    assert (retrying["max_attempts"], retrying["attempt"]) == (2, 1)
    assert retrying["next_retry_at"]


def test_a_final_failure_records_failed_then_discarded(claim):
    job = claim(options={"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}})
    Job.objects.fail(job.id, Failure(type="Fatal", message="no"))
    assert event_types(job)[-2:] == ["job.failed", "job.discarded"]
    discarded = data_of(job, "job.discarded")
    assert (discarded["total_attempts"], discarded["dead_letter"]) == (1, True)


def test_cancel_records_job_cancelled_with_the_previous_state(push):
    job = push()
    Job.objects.cancel(job.id)
    assert data_of(job, "job.cancelled")["previous_state"] == "available"
    Job.objects.cancel(job.id)  # idempotent: no second event
    assert event_types(job) == ["job.enqueued", "job.cancelled"]


def test_expiry_records_job_expired(push):
    job = push(expires_at="2001-01-01T00:00:00Z")
    assert Job.objects.expire_overdue(10) == 1
    assert event_types(job) == ["job.enqueued", "job.expired"]
    assert data_of(job, "job.expired")["expired_at"] == "2001-01-01T00:00:00.000Z"


def test_queue_and_worker_moves_are_recorded(db):
    Queue.objects.pause("q")
    Queue.objects.resume("q")
    Worker.objects.register("w1")
    Worker.objects.deregister("w1")
    assert event_types() == ["queue.paused", "queue.resumed", "worker.started", "worker.stopped"]


def test_events_roll_back_with_their_move(db, spec):
    with pytest.raises(RuntimeError), transaction.atomic():
        Job.objects.push(spec())
        raise RuntimeError
    assert not Event.objects.exists()


def test_no_events_are_written_when_events_are_off(ojs, claim, push):
    ojs(EVENTS=False)
    done = claim()
    Job.objects.ack(done.id)
    failed = claim(options={"retry": {"max_attempts": 1}})
    Job.objects.fail(failed.id, Failure(type="E", message=""))
    Job.objects.cancel(push().id)
    push(expires_at="2001-01-01T00:00:00Z")
    Job.objects.expire_overdue(10)
    Queue.objects.pause("q")
    Worker.objects.register("w1")
    assert Job.objects.count() == 4
    assert not Event.objects.exists()
