"""Counters (the Prometheus metrics) are told of every committed event exactly once.

With no signal receiver connected the one-statement paths tell them only
(queue, job type) pairs: the statements stay as they are with metrics off,
no event row is read back per job. With a receiver connected they count the
events the receivers get. Either way: after commit, never for a rollback.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from django_ojs.core.types import Lease, Settlement
from django_ojs.models import Job, Worker
from django_ojs.observe import signals
from django_ojs.protocol.failure import Failure

pytestmark = [
    pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queue_settings_cached"),
]


class Tally:
    """A counter recording each event it is told of: (type, queue, job type, inside a transaction?)."""

    kinds = frozenset({"job.enqueued", "job.started", "job.completed", "job.failed", "job.discarded"})

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, bool]] = []

    def count_events(self, events: list) -> None:
        for event in events:
            self.seen.append((event.type, event.queue, event.data.get("job_type"), connection.in_atomic_block))

    def count_moves(self, kind: str, pairs: list[tuple[str, str]]) -> None:
        self.seen.extend((kind, queue, job_type, connection.in_atomic_block) for queue, job_type in pairs)


@pytest.fixture
def counted():
    tally = Tally()
    signals.count_with(tally)
    yield tally.seen
    signals.stop_counting(tally)


def kinds(counted) -> list[str]:
    assert not any(inside for *_, inside in counted), "counted inside its transaction"
    return sorted(kind for kind, *_ in counted)


def statements(operation) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        operation()
    return [q["sql"] for q in queries.captured_queries]


def returns_events(sql: list[str]) -> bool:
    return any("RETURNING seq, id, type" in statement or "ojs_e." in statement for statement in sql)


def test_counting_alone_reads_no_event_back_and_counts_each_fast_move_once(spec, push, counted):
    assert signals.counting() and not signals.wanted()
    Worker.objects.register("w1")
    Job.objects.push(spec(type="mail.send", options={"queue": "counted"}))  # the queue's row, once per process
    counted.clear()
    pushed = statements(lambda: Job.objects.push_many([spec(type="mail.send", options={"queue": "counted"})] * 3))
    assert kinds(counted) == ["job.enqueued"] * 3
    assert {(queue, job_type) for _, queue, job_type, _ in counted} == {("counted", "mail.send")}
    counted.clear()
    fetched = statements(lambda: Job.objects.fetch(["counted"], worker_id="w1"))
    [job] = Job.objects.filter(queue="counted", state="active")
    acked = statements(lambda: Job.objects.ack(job.id, lease=Lease("w1", 1)))
    running = Job.objects.fetch(["counted"], count=2, worker_id="w1")
    turn = statements(lambda: Job.objects.settle_and_fetch(
        "w1", [Settlement(j.id, Lease("w1", 1), result=None) for j in running], ["counted"], 2))
    assert kinds(counted) == ["job.completed"] * 3 + ["job.started"] * 4
    assert len(pushed) == len(fetched) == len(acked) == len(turn) == 1
    assert not returns_events(pushed + fetched + acked + turn)


def test_nothing_is_counted_before_commit_nor_for_a_rollback(spec, counted):
    with transaction.atomic():
        Job.objects.push(spec(options={"queue": "counted"}))
        assert counted == []
    assert kinds(counted) == ["job.enqueued"]
    with pytest.raises(RuntimeError), transaction.atomic():
        Job.objects.push(spec(options={"queue": "counted"}))
        raise RuntimeError("roll back")
    assert len(counted) == 1


def test_with_a_receiver_connected_each_event_is_counted_once(push, counted):
    received: list = []

    def on_event(sender, event, **kwargs):
        received.append(event.type)

    signals.ojs_event.connect(on_event)
    try:
        Worker.objects.register("w1")
        push(options={"queue": "counted"})
        [job] = Job.objects.fetch(["counted"], worker_id="w1")
        Job.objects.ack(job.id, lease=Lease("w1", 1))
    finally:
        signals.ojs_event.disconnect(on_event)
    assert kinds(counted) == sorted(received) == ["job.completed", "job.enqueued", "job.started", "worker.started"]


def test_the_stepwise_paths_are_counted_from_their_events(push, counted):
    """A failure (decided in Python, written stepwise) reaches the counters as an event, once."""
    Worker.objects.register("w1")
    push(type="mail.send", options={"queue": "counted", "retry": {"max_attempts": 1}})
    [job] = Job.objects.fetch(["counted"], worker_id="w1")
    counted.clear()
    Job.objects.settle_many([Settlement(job.id, Lease("w1", 1), failure=Failure(type="Boom", message="no"))])
    assert kinds(counted) == ["job.discarded", "job.failed"]


def test_the_metrics_count_committed_moves_from_pairs(spec, push):
    pytest.importorskip("prometheus_client")
    from prometheus_client import REGISTRY

    from django_ojs.observe import metrics

    def value(name: str) -> float:
        return REGISTRY.get_sample_value(name, {"queue": "metered", "type": "mail.send"}) or 0.0

    before = value("ojs_job_enqueued_total"), value("ojs_job_completed_total")
    metrics.enable()
    try:
        Worker.objects.register("w1")
        Job.objects.push_many([spec(type="mail.send", options={"queue": "metered"})] * 4)
        running = Job.objects.fetch(["metered"], count=3, worker_id="w1")
        Job.objects.settle_and_fetch("w1", [Settlement(j.id, Lease("w1", 1)) for j in running], ["metered"], 0)
    finally:
        metrics.disable()
    assert (value("ojs_job_enqueued_total") - before[0], value("ojs_job_completed_total") - before[1]) == (4, 3)


def test_a_counter_is_not_told_of_kinds_it_does_not_count(push):
    """The metrics count no ``job.started``: a worker turn's claim registers nothing for them."""
    from django_ojs.observe import metrics

    told: list = []

    class Completions(Tally):
        kinds = frozenset({"job.completed"})

    Worker.objects.register("w1")
    push(options={"queue": "counted"})
    counter = Completions()
    counter.seen = told
    signals.count_with(counter)
    try:
        with transaction.atomic():
            Job.objects.fetch(["counted"], worker_id="w1")
            assert not any(entry[1].__qualname__.startswith("_Batch") for entry in connection.run_on_commit)
    finally:
        signals.stop_counting(counter)
    assert told == [] and "job.started" not in metrics.COUNTING.kinds
