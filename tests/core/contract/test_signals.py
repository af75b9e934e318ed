"""Lifecycle events as Django signals: after commit, exactly once, never for a rollback."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection, transaction

import django_ojs
from django_ojs.core.types import Lease
from django_ojs.models import Event, Job, Worker
from django_ojs.observe import signals
from django_ojs.protocol.failure import Failure

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def received():
    seen: list = []

    def on_event(sender, event, **kwargs):
        seen.append(event)

    signals.ojs_event.connect(on_event)
    yield seen
    signals.ojs_event.disconnect(on_event)


def test_nothing_is_built_when_nobody_listens():
    assert not signals.wanted()


def test_an_event_is_sent_once_after_commit_not_before(received):
    with transaction.atomic():
        job = django_ojs.enqueue("sig.test", [1])
        assert received == []  # inside the transaction: not yet
    assert [(e.type, e.job_id) for e in received] == [("job.enqueued", job.id)]
    # The saved row, as the feed serves it.
    assert Event.objects.get(type="job.enqueued").id == received[0].id


def test_nothing_is_sent_for_a_rolled_back_transaction(received):
    with pytest.raises(RuntimeError), transaction.atomic():
        django_ojs.enqueue("sig.test")
        raise RuntimeError("roll back")
    django_ojs.enqueue("sig.after")
    assert [e.data["job_type"] for e in received] == ["sig.after"]


def test_a_rolled_back_savepoint_takes_its_events_the_outer_ones_stay(received):
    with transaction.atomic():
        django_ojs.enqueue("sig.outer")
        with pytest.raises(RuntimeError), transaction.atomic():
            django_ojs.enqueue("sig.inner")
            raise RuntimeError("roll back the savepoint")
        django_ojs.enqueue("sig.outer2")
    assert [e.data["job_type"] for e in received] == ["sig.outer", "sig.outer2"]


def test_a_thousand_job_batch_registers_one_callback(received):
    with transaction.atomic():
        django_ojs.enqueue_many([{"type": "sig.many", "args": [i]} for i in range(1000)])
        ours = [entry for entry in connection.run_on_commit if getattr(entry[1], "__self__", None).__class__
                is signals._Batch]
        assert len(ours) == 1
    assert len(received) == 1000
    assert len({e.id for e in received}) == 1000


def test_the_typed_signals_and_the_fetch_path_built_in_sql():
    got = Counter()

    def count(sender, event, **kwargs):
        got[event.type] += 1

    for signal in (signals.job_started, signals.job_completed, signals.job_failed):
        signal.connect(count)
    try:
        django_ojs.enqueue("sig.a")
        django_ojs.enqueue("sig.b", retry={"max_attempts": 1})
        Worker.objects.register("w1")
        jobs = Job.objects.fetch(["default"], count=2, worker_id="w1")
        assert got == {"job.started": 2}
        ok, bad = sorted(jobs, key=lambda j: j.type)
        Job.objects.ack(ok.id, lease=Lease(worker_id="w1", attempt=1))
        Job.objects.fail(bad.id, Failure(type="Boom", message="no"), lease=Lease(worker_id="w1", attempt=1))
        assert got == {"job.started": 2, "job.completed": 1, "job.failed": 1}
        completed = Event.objects.get(type="job.completed")
        assert completed.data["duration_ms"] >= 0
    finally:
        for signal in (signals.job_started, signals.job_completed, signals.job_failed):
            signal.disconnect(count)


def test_a_failing_receiver_is_logged_and_does_not_break_the_move(caplog):
    def broken(sender, event, **kwargs):
        raise ValueError("receiver bug")

    signals.job_enqueued.connect(broken)
    try:
        job = django_ojs.enqueue("sig.test")
    finally:
        signals.job_enqueued.disconnect(broken)
    assert Job.objects.get(id=job.id).state == "available"
    assert "receiver bug" in caplog.text


def test_signals_fire_with_the_event_store_off(received, ojs):
    ojs(EVENTS=False)
    django_ojs.enqueue("sig.test")
    assert [e.type for e in received] == ["job.enqueued"]
    # Never stored, so no seq to make its id from: it is given one, and its payload.
    assert received[0].seq is None and received[0].id.version == 7
    assert received[0].data["job_type"] == "sig.test"
    assert not Event.objects.exists()
