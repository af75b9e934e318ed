"""Lifecycle events (ojs-events) are written in the transaction of the move they record."""

from __future__ import annotations

import pytest
from django.db import transaction

from django_ojs.core.events import events_of_job_types
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


def test_an_event_id_is_a_uuidv7_of_its_time_with_its_seq_as_counter_the_same_on_every_read(push):
    first, second = push(), push()
    older, newer = (Event.objects.get(job_id=job.id) for job in (first, second))
    assert older.stored_id is None  # nothing random is stored: the id is made from the row
    assert older.id.version == 7 and older.id.variant == "specified in RFC 4122"
    assert int(older.id.hex[:12], 16) == int(older.time.timestamp() * 1000)
    assert older.id < newer.id
    assert Event.objects.get(seq=older.seq).id == older.id
    assert len({e.id for e in Event.objects.all()}) == Event.objects.count()


def test_an_event_written_in_the_older_layout_keeps_its_id_and_payload(push):
    """Before the job's fields had columns (migration 0033), the payload was all JSON and the id stored."""
    import uuid

    job = push(type="old.kind", options={"queue": "olden"})
    stored_id = uuid.uuid4()
    payload = {"job_id": str(job.id), "job_type": "old.kind", "queue": "olden", "state": "available", "attempt": 0}
    old = Event.objects.create(stored_id=stored_id, type="job.enqueued", time=job.created_at, job_id=job.id, queue="olden",
                               extra=payload)
    new = Event.objects.filter(job_id=job.id).exclude(seq=old.seq).get()
    assert old.id == stored_id
    assert old.data == payload == {key: new.data[key] for key in payload}
    assert set(Event.objects.filter(events_of_job_types(["old.kind"])).values_list("seq", flat=True)) == {
        old.seq, new.seq}


@pytest.mark.django_db
def test_no_index_keeps_event_ids_unique_their_seq_does():
    """An index over ids made from the seq would cost every event a second unique check for nothing."""
    from django.db import connection

    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Event._meta.db_table)
    assert [name for name, c in constraints.items() if c["columns"] == ["id"]] == []
    assert any(c["primary_key"] and c["columns"] == ["seq"] for c in constraints.values())
