"""Jobs no running worker can run (``core/coverage.py``): what the overview, ``manage.py ojs queues``,
the metrics, the W006 check and the worker's start say."""

from __future__ import annotations

from django_ojs.core import coverage, stats
from django_ojs.core.types import WorkerInfo
from django_ojs.models import Job, Worker
from tests.helpers import ago


def worker(worker_id, queues, handles):
    return Worker.objects.register(worker_id, WorkerInfo(queues=queues, handles=handles))


def test_jobs_of_a_type_no_live_worker_of_the_queue_handles_are_named_by_queue_and_type(push):
    worker("w1", ["default"], ["email.send"])
    push(type="email.send")
    first = push(type="report.new")
    push(type="report.new")
    found, complete = coverage.unrunnable()
    assert complete
    assert [(item.queue, item.type, item.count) for item in found] == [("default", "report.new", 2)]
    assert found[0].oldest_at == Job.objects.get(pk=first.pk).enqueued_at


def test_a_type_handled_by_another_live_worker_of_the_queue_is_runnable(push):
    worker("w1", ["default"], ["email.send"])
    worker("w2", ["default", "other"], ["report.new"])
    push(type="report.new")
    assert coverage.unrunnable()[0] == []


def test_a_worker_that_declares_no_types_can_run_any_type_of_its_queues(push):
    worker("w1", ["default"], ["email.send"])
    worker("http-worker", ["default"], None)
    push(type="anything.at.all")
    assert coverage.unrunnable()[0] == []


def test_dead_and_draining_workers_are_no_consumers(push):
    worker("w-dead", ["default"], ["report.new"])
    worker("w-going", ["default"], ["report.new"])
    worker("w-live", ["default"], ["email.send"])
    Worker.objects.filter(pk="w-dead").update(last_heartbeat_at=ago(minutes=5))
    Worker.objects.beat("w-going", state="terminate")
    push(type="report.new")
    assert [item.type for item in coverage.unrunnable()[0]] == ["report.new"]


def test_a_queue_nobody_reads_is_unconsumed_not_unrunnable(push):
    worker("w1", ["default"], ["email.send"])
    push(type="x", options={"queue": "orphaned"})
    push(type="x", options={"queue": "orphaned"})
    assert coverage.unrunnable()[0] == []
    [queue] = coverage.unconsumed(stats.available_by_queue(stats.live_counts()))
    assert (queue.queue, queue.waiting.value) == ("orphaned", 2)


def test_a_workers_own_view_names_what_it_would_leave(push):
    push(type="new.kind", options={"queue": "mail"})
    push(type="old.kind", options={"queue": "mail"})
    found, _ = coverage.uncovered({"mail": ["old.kind"]})
    assert [(item.queue, item.type, item.count) for item in found] == [("mail", "new.kind", 1)]


def test_a_large_count_reads_with_thousands_separators_as_every_other_count_of_the_console():
    import datetime as dt

    now = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)
    item = coverage.Unrunnable("default", "report.new", 12345, now - dt.timedelta(minutes=5))
    [line] = coverage.describe([item], now)
    assert line.startswith("12,345 job(s) of type 'report.new' on queue 'default'"), line
