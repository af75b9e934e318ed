"""PUSH through the core: Job.objects.push / push_many (ojs-core §7.1)."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.db import transaction

from django_ojs.core.clock import db_now
from django_ojs.models import Event, Job, Queue
from django_ojs.protocol.errors import Duplicate, InvalidRequest
from django_ojs.protocol.retry import DEFAULT_POLICY
from tests.helpers import event_types, race

JOB_ID = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


def test_push_stores_the_job_with_every_system_attribute(push):
    before = db_now()
    job = Job.objects.get(pk=push(type="email.send", args=["a@example.com"], meta={"k": 1}).pk)
    assert (job.type, job.args, job.meta, job.queue, job.priority) == (
        "email.send", ["a@example.com"], {"k": 1}, "default", 0)
    assert (job.state, job.attempt, job.max_attempts) == ("available", 0, 3)
    assert job.id.version == 7
    assert before <= job.created_at <= db_now()
    assert job.enqueued_at == job.created_at
    assert job.retry == DEFAULT_POLICY.to_dict()
    # ojs-core §5.2 and ojs-worker-protocol §5.2 defaults.
    assert job.timeout == dt.timedelta(seconds=1800)
    assert job.visibility_timeout == dt.timedelta(seconds=1800)
    assert (job.started_at, job.completed_at, job.worker_id, job.error, job.result) == (None,) * 5


def test_push_keeps_the_client_id_and_the_client_policy(push):
    job = push(id=JOB_ID, options={"retry": {"max_attempts": 7, "jitter": False}, "timeout_ms": 2000,
                                   "visibility_timeout_ms": 3000, "tags": ["t"]})
    job = Job.objects.get(id=JOB_ID)
    assert job.max_attempts == 7 and job.retry["jitter"] is False
    assert (job.timeout, job.visibility_timeout, job.tags) == (
        dt.timedelta(seconds=2), dt.timedelta(seconds=3), ["t"])


def test_the_default_timeout_setting_applies_and_zero_disables_it(push, ojs):
    ojs(DEFAULT_TIMEOUT=0, DEFAULT_VISIBILITY_TIMEOUT=60)
    job = push()
    assert job.timeout is None
    assert job.visibility_timeout == dt.timedelta(seconds=60)


def test_a_future_scheduled_at_makes_a_scheduled_job(push):
    at = db_now() + dt.timedelta(hours=1)
    job = push(options={"delay_until": at.isoformat()})
    assert (job.state, job.scheduled_at, job.run_at, job.enqueued_at) == ("scheduled", at, at, None)


def test_a_past_scheduled_at_makes_an_available_job(push):
    job = push(scheduled_at="2001-01-01T00:00:00Z")
    assert (job.state, job.run_at) == ("available", None)
    assert job.enqueued_at is not None


def test_a_relative_scheduled_at_is_resolved_against_the_database_clock(push):
    job = push(options={"scheduled_at": "+PT5S", "expires_at": "+PT1H"})
    assert job.scheduled_at - job.created_at == dt.timedelta(seconds=5)
    assert job.expires_at - job.created_at == dt.timedelta(hours=1)
    assert job.given_times == {}


def test_a_pending_job_waits_for_activation(push):
    job = push(options={"pending": True})
    assert (job.state, job.enqueued_at) == ("pending", None)


def test_a_job_cannot_be_both_pending_and_scheduled(push):
    with pytest.raises(InvalidRequest) as raised:
        push(options={"pending": True, "delay_until": "2999-01-01T00:00:00Z"})
    assert raised.value.field == "options.pending"
    assert not Job.objects.exists()


def test_push_gives_a_new_queue_its_row(push):
    push(options={"queue": "reports"})
    push(options={"queue": "reports"})
    assert list(Queue.objects.values_list("name", "paused")) == [("reports", False)]


def test_push_many_stores_every_job_in_order(db, spec):
    jobs = Job.objects.push_many([spec(type="a", args=[i]) for i in range(5)])
    assert [job.args for job in Job.objects.order_by("seq")] == [[0], [1], [2], [3], [4]]
    assert [job.args for job in jobs] == [[0], [1], [2], [3], [4]]
    assert event_types() == ["job.enqueued"] * 5


def test_push_many_is_atomic_one_bad_job_stores_nothing(db, spec):
    batch = [spec(options={"queue": "batch"}), spec(options={"pending": True, "delay_until": "2999-01-01T00:00:00Z"})]
    with pytest.raises(InvalidRequest):
        Job.objects.push_many(batch)
    assert not Job.objects.exists()
    assert not Event.objects.exists()
    assert not Queue.objects.filter(name="batch").exists()


def test_a_job_id_that_exists_is_a_duplicate_and_stores_nothing(push, spec):
    push(id=JOB_ID)
    with pytest.raises(Duplicate) as raised:
        Job.objects.push_many([spec(), spec(id=JOB_ID)])
    assert raised.value.details["existing_job_id"] == JOB_ID
    assert Job.objects.count() == 1


def test_the_same_id_twice_in_one_batch_is_a_duplicate(db, spec):
    with pytest.raises(Duplicate):
        Job.objects.push_many([spec(id=JOB_ID), spec(id=JOB_ID)])
    assert not Job.objects.exists()


def test_push_inside_a_transaction_that_rolls_back_leaves_nothing(db, spec):
    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        Job.objects.push(spec(options={"queue": "txn"}))
        assert Job.objects.count() == 1
        raise Abort
    assert not Job.objects.exists()
    assert not Event.objects.exists()
    assert not Queue.objects.filter(name="txn").exists()


def test_push_inside_a_transaction_commits_with_it(db, spec):
    with transaction.atomic():
        job = Job.objects.push(spec())
    assert Job.objects.get(pk=job.pk).state == "available"


def test_a_duplicate_inside_a_caller_transaction_leaves_the_transaction_usable(push, spec):
    push(id=JOB_ID)
    with transaction.atomic():
        with pytest.raises(Duplicate):
            Job.objects.push(spec(id=JOB_ID))
        Job.objects.push(spec(type="after.duplicate"))
    assert Job.objects.filter(type="after.duplicate").count() == 1


def test_two_concurrent_pushes_of_one_id_store_it_once(transactional_db, spec):
    outcomes: list[str] = []

    def push_same_id() -> None:
        try:
            Job.objects.push(spec(id=JOB_ID))
            outcomes.append("stored")
        except Duplicate:
            outcomes.append("duplicate")

    race([push_same_id, push_same_id])
    assert sorted(outcomes) == ["duplicate", "stored"]
    assert Job.objects.filter(id=uuid.UUID(JOB_ID)).count() == 1
