"""An in-process worker claims only the job types it has handlers for (``types``).

A job of a type it cannot run is stepped over, never claimed: it waits,
``available`` at attempt 0, for a worker that can run it. A claim without
``types`` (an HTTP worker's FETCH) takes any type, as before.
"""

from __future__ import annotations

from django_ojs.core.types import Lease, Settlement
from django_ojs.models import Job, Queue
from tests.helpers import reload


def test_a_typed_claim_steps_over_jobs_of_other_types_and_leaves_them_untouched(push):
    unknown = push(type="reports.new_kind", args=["first"])
    known = push(type="email.send", args=["second"])
    claimed = Job.objects.fetch(["default"], count=5, worker_id="w1", types=["email.send"])
    assert [job.id for job in claimed] == [known.id]
    stored = reload(unknown)
    assert (stored.state, stored.attempt, stored.worker_id, stored.started_at) == ("available", 0, None, None)


def test_a_typed_claim_of_several_queues_skips_queues_with_only_other_types(push):
    push(type="other", options={"queue": "first"})
    push(type="mine", args=["b"], options={"queue": "second"})
    claimed = Job.objects.fetch(["first", "second"], count=2, worker_id="w1", types=["mine"])
    assert [job.args for job in claimed] == [["b"]]
    assert Job.objects.get(queue="first").state == "available"


def test_a_claim_without_types_takes_any_type(push):
    push(type="a")
    push(type="b")
    assert sorted(job.type for job in Job.objects.fetch(["default"], count=5)) == ["a", "b"]


def test_a_worker_with_no_handler_types_claims_nothing(push):
    push(type="a")
    assert Job.objects.fetch(["default"], count=5, worker_id="w1", types=[]) == []
    assert Job.objects.get().state == "available"


def test_a_typed_claim_keeps_priority_order_within_its_types(push):
    push(type="other", priority=100)
    push(type="mine", args=["low"], priority=-5)
    push(type="mine", args=["high"], priority=5)
    claimed = Job.objects.fetch(["default"], count=5, worker_id="w1", types=["mine"])
    assert [job.args for job in claimed] == [["high"], ["low"]]


def test_a_typed_claim_under_a_rate_limit_keeps_to_its_types(push):
    Queue.objects.update_or_create(name="limited", defaults={"concurrency": 5})
    push(type="other", options={"queue": "limited"})
    push(type="mine", args=["x"], options={"queue": "limited"})
    claimed = Job.objects.fetch(["limited"], count=5, worker_id="w1", types=["mine"])
    assert [job.args for job in claimed] == [["x"]]
    assert Job.objects.get(type="other").state == "available"


def test_the_worker_turn_claims_only_its_types_after_writing_its_batch(push):
    running = push(type="mine", args=["done"])
    [held] = Job.objects.fetch(["default"], worker_id="w1", types=["mine"])
    assert held.id == running.id
    push(type="other", args=["not mine"])
    push(type="mine", args=["next"])
    verdicts, claimed = Job.objects.settle_and_fetch(
        "w1", [Settlement(held.id, Lease("w1", held.attempt), result=1)], ["default"], 5, types=["mine"]
    )
    assert [verdict.value for verdict in verdicts] == ["completed"]
    assert [job.args for job in claimed] == [["next"]]
    assert Job.objects.get(type="other").state == "available"
    _, claimed = Job.objects.settle_and_fetch("w1", [], ["default"], 5, types=["mine"])
    assert claimed == []
