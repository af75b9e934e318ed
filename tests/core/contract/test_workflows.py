"""Workflows in the store: chain, group, batch, nesting and the DAG, advanced by the
transaction that settles each step's job (django_ojs/core/workflows.py).

Every test drives real jobs through the core's own moves (fetch, ack, fail,
settle_many, the reaper's recoveries, cancel) and reads what the workflow
and its jobs became.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import transaction

from django_ojs.core import workflows as store
from django_ojs.core.types import Lease, Settlement
from django_ojs.models import Event, Job, Queue, Workflow, WorkflowNode
from django_ojs.protocol.envelope import parse_job
from django_ojs.protocol.errors import InvalidRequest, InvalidTransition
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.workflows import parse
from tests.helpers import ago, race, update

BOOM = Failure(type="Boom", message="it broke", retryable=True)


def create(body: dict[str, Any]) -> Workflow:
    return store.create(parse(body, max_jobs=1000, job_options=store.job_options()))


def job(kind: str, queue: str = "wf", **options: Any) -> dict[str, Any]:
    return {"type": kind, "args": [kind], "options": {"queue": queue, **options}}


def take(queue: str = "wf", count: int = 1) -> list[Job]:
    return Job.objects.fetch([queue], count=count, worker_id="w1")


def ack(claimed: Job, result: Any = None) -> None:
    Job.objects.ack(claimed.id, result=result, lease=Lease("w1"))


def fail(claimed: Job) -> None:
    Job.objects.fail(claimed.id, BOOM, lease=Lease("w1"))


def nodes(workflow: Workflow) -> dict[str, str]:
    return dict(WorkflowNode.objects.filter(workflow=workflow).values_list("path", "state"))


def state(workflow: Workflow) -> str:
    return Workflow.objects.get(id=workflow.id).state


def workflow_events(workflow: Workflow) -> list[str]:
    return [
        event.type
        for event in Event.objects.filter(type__startswith="workflow.").order_by("seq")
        if event.data.get("workflow_id") == str(workflow.id)
    ]


def test_a_chain_runs_one_step_at_a_time_and_passes_every_earlier_result(db):
    workflow = create({"type": "chain", "name": "etl", "steps": [job("a"), job("b"), job("c")]})
    assert Job.objects.filter(queue="wf").count() == 1  # only step 0 exists (ojs-workflows §4.3)
    first = take()[0]
    assert (first.type, first.extra["parent_results"], first.extra["workflow_id"]) == ("a", [], str(workflow.id))
    assert take() == []
    ack(first, {"n": 1})
    second = take()[0]
    assert (second.type, second.extra["parent_results"]) == ("b", [{"n": 1}])
    ack(second, "two")
    third = take()[0]
    assert (third.type, third.extra["parent_results"]) == ("c", [{"n": 1}, "two"])
    assert state(workflow) == "running"
    ack(third, 3)
    assert state(workflow) == "completed"
    assert set(nodes(workflow).values()) == {"completed"}
    assert workflow_events(workflow) == [
        "workflow.created", "workflow.started", "workflow.step_completed", "workflow.step_completed",
        "workflow.step_completed", "workflow.completed",
    ]


def test_a_chain_step_that_exhausts_its_retries_halts_the_chain_and_fails_the_workflow(db):
    workflow = create({"type": "chain", "steps": [job("a"), job("b", retry={"max_attempts": 2}), job("c")]})
    ack(take()[0], "ok")
    fail(take()[0])  # attempt 1 of 2: the step is retryable, the workflow still runs
    assert state(workflow) == "running" and nodes(workflow)["1"] == "pending"
    retried = Job.objects.get(type="b")
    update(retried, state="available", run_at=None)
    fail(take()[0])
    assert state(workflow) == "failed"
    assert nodes(workflow) == {"": "failed", "0": "completed", "1": "failed", "2": "cancelled"}
    assert not Job.objects.filter(type="c").exists()
    report = store.failure_report(workflow, WorkflowNode.objects.filter(workflow=workflow))
    assert report["failed_step_index"] == 1 and report["failed_job_ids"] == [str(retried.id)]
    assert report["errors"][0]["code"] == "Boom"
    assert workflow_events(workflow)[-2:] == ["workflow.step_failed", "workflow.failed"]


def test_a_group_enqueues_every_job_at_once_and_fails_only_when_all_ended(db):
    workflow = create({"type": "group", "jobs": [job("a", retry={"max_attempts": 1}), job("b"), job("c")]})
    claimed = take(count=5)
    assert [j.type for j in claimed] == ["a", "b", "c"]  # list order, FIFO
    fail(claimed[0])
    assert state(workflow) == "running"  # siblings go on (§5.3 rule 4)
    ack(claimed[1], 1)
    assert state(workflow) == "running"
    ack(claimed[2], 2)
    assert state(workflow) == "failed"
    assert nodes(workflow) == {"": "failed", "0": "failed", "1": "completed", "2": "completed"}


@pytest.mark.parametrize("outcome", ["success", "failure"])
def test_a_batch_fires_the_callbacks_its_outcome_calls_for_with_every_result(db, outcome):
    workflow = create({
        "type": "batch",
        "jobs": [job("a"), job("b", retry={"max_attempts": 1})],
        "callbacks": {name: job(f"cb.{name}", queue="cb") for name in ("on_complete", "on_success", "on_failure")},
    })
    first, second = take(count=2)
    ack(first, "A")
    assert not Job.objects.filter(queue="cb").exists()
    if outcome == "success":
        ack(second, "B")
    else:
        fail(second)
    callbacks = take("cb", count=5)
    expected = {"cb.on_complete", "cb.on_success" if outcome == "success" else "cb.on_failure"}
    assert {c.type for c in callbacks} == expected
    assert [c.extra["parent_results"] for c in callbacks] == [["A", "B" if outcome == "success" else None]] * 2
    skipped = "on_failure" if outcome == "success" else "on_success"
    assert nodes(workflow)[skipped] == "skipped"
    assert state(workflow) == "running"  # callbacks still run (§8.3)
    for callback in callbacks:
        ack(callback)
    # §12.3 B: callbacks that succeeded complete the batch, whatever its jobs did.
    assert state(workflow) == "completed"
    assert workflow_events(workflow).count("workflow.callback_fired") == 2


def test_a_failed_callback_fails_the_batch(db):
    workflow = create({"type": "batch", "jobs": [job("a")],
                       "callbacks": {"on_success": job("cb", queue="cb", retry={"max_attempts": 1})}})
    ack(take()[0])
    fail(take("cb")[0])
    assert state(workflow) == "failed"


def test_a_group_inside_a_chain_fans_out_and_the_next_step_gets_all_its_results(db):
    workflow = create({"type": "chain", "steps": [
        job("extract"),
        {"type": "group", "jobs": [job("t1"), {"type": "chain", "steps": [job("t2a"), job("t2b")]}]},
        job("load"),
    ]})
    ack(take()[0], "raw")
    t1, t2a = take(count=5)
    assert (t1.extra["parent_results"], t2a.extra["parent_results"]) == (["raw"], ["raw"])
    ack(t1, "one")
    ack(t2a, "2a")
    t2b = take()[0]
    assert t2b.extra["parent_results"] == ["raw", "2a"]
    ack(t2b, "2b")
    load = take()[0]
    # A group's result is its jobs' results in order; a chain's, its last step's (§7.3).
    assert (load.type, load.extra["parent_results"]) == ("load", ["raw", ["one", "2b"]])
    ack(load)
    assert state(workflow) == "completed"


def test_the_bindings_dag_runs_a_diamond(db):
    workflow = create({"name": "diamond", "steps": [
        {"id": "d", "type": "d", "args": [], "depends_on": ["b", "c"]},
        {"id": "a", "type": "a", "args": [], "depends_on": []},
        {"id": "b", "type": "b", "args": [], "depends_on": ["a"]},
        {"id": "c", "type": "c", "args": [], "depends_on": ["a"]},
    ], "options": {"queue": "wf"}})
    assert workflow.type == "dag"
    ack(take()[0], "A")
    b, c = take(count=5)
    assert {b.type, c.type} == {"b", "c"} and b.extra["parent_results"] == ["A"]
    ack(b, "B")
    assert take() == []  # d waits for both
    ack(c, "C")
    d = take()[0]
    assert (d.type, d.extra["parent_results"]) == ("d", ["A", "B", "C"])
    ack(d)
    assert state(workflow) == "completed"


def test_each_steps_node_stores_its_job_inputs_outcome_and_times(db):
    """The nodes an ACK writes, as the admin, the API and the events read them back."""
    workflow = create({"name": "fan", "steps": [
        {"id": "a", "type": "a", "args": [], "depends_on": []},
        *({"id": f"b{i}", "type": "b", "args": [i], "depends_on": ["a"]} for i in range(3)),
    ], "options": {"queue": "wf"}})
    ack(take()[0], {"from": "a"})
    started = take(count=5)
    fail(started[0])  # a retryable failure: the step has not ended
    rows = {node.path: node for node in WorkflowNode.objects.filter(workflow=workflow)}
    a = rows["0"]  # a node's path is its step's index
    assert (a.state, a.result, a.error) == ("completed", {"from": "a"}, None)
    assert a.started_at is not None and a.finished_at is not None and a.finished_at >= a.started_at
    jobs = {job.extra["workflow_step"]: job for job in Job.objects.filter(type="b")}
    assert set(jobs) == {"1", "2", "3"}
    for path, job in jobs.items():
        node = rows[path]
        assert (node.state, node.job_id, node.job_seq) == ("pending", job.id, job.seq)
        assert (node.inputs, node.result, node.error, node.finished_at) == ([{"from": "a"}], None, None, None)
        assert node.started_at == a.finished_at  # started by the ACK that finished a


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"type": "chain", "steps": []}, "$.steps"),
        ({"type": "group"}, "$.jobs"),
        ({"type": "batch", "jobs": [job("a")]}, "$.callbacks"),
        ({"type": "batch", "jobs": [job("a")], "callbacks": {"on_maybe": job("x")}}, "$.callbacks"),
        ({"type": "chain", "steps": [{"type": "", "args": []}]}, "$.steps[0].type"),
        ({"type": "chain", "steps": [{"type": "a", "args": "no"}]}, "$.steps[0].args"),
        ({"type": "chain", "steps": [{"type": "a", "args": [], "id": "0195b9f0-0000-7000-8000-000000000000"}]},
         "$.steps[0].id"),
        ({"type": "group", "jobs": [{"type": "a", "args": [], "options": {"unique": {"keys": ["type"]}}}]},
         "$.jobs[0].options.unique"),
        ({"type": "loop", "steps": [job("a")]}, "type"),
        ({"steps": [{"id": "a", "type": "a", "depends_on": ["b"]}, {"id": "b", "type": "b", "depends_on": ["a"]}]},
         "$.steps"),
        ({"steps": [{"id": "a", "type": "a", "depends_on": ["zz"]}]}, "$.steps[0].depends_on"),
        ({"type": "chain", "steps": [{"type": "group", "jobs": [{"type": "chain", "steps": [
            {"type": "group", "jobs": [{"type": "chain", "steps": [job("deep")]}]}]}]}]}, "$.steps[0]"),
    ],
)
def test_a_bad_definition_is_refused_whole_and_stores_nothing(db, body, path):
    with pytest.raises(InvalidRequest) as refused:
        create(body)
    assert refused.value.details.get("field", "").startswith(path) or refused.value.details.get("field") == path
    assert not Workflow.objects.exists() and not Job.objects.exists()


def test_a_workflow_created_in_a_rolled_back_transaction_leaves_nothing(db):
    with pytest.raises(RuntimeError), transaction.atomic():
        create({"type": "group", "jobs": [job("a"), job("b")]})
        raise RuntimeError("the caller's transaction fails")
    assert not Workflow.objects.exists() and not Job.objects.exists()


def test_cancel_cancels_every_unfinished_job_and_refuses_a_second_time(db):
    workflow = create({"type": "group", "jobs": [job("a"), job("b"), job("c")]})
    active, done = take(count=2)
    ack(done, "kept")
    cancelled, counts = store.cancel(workflow.id)
    assert cancelled.state == "cancelled"
    assert counts == {"steps_cancelled": 2, "steps_already_completed": 1}
    assert dict(Job.objects.values_list("type", "state")) == {"a": "cancelled", "b": "completed", "c": "cancelled"}
    assert take() == []
    with pytest.raises(InvalidTransition):
        store.cancel(workflow.id)
    # The cancelled worker's late ACK is refused; the workflow stays cancelled.
    with pytest.raises(InvalidTransition):
        ack(active)
    assert state(workflow) == "cancelled" and workflow_events(workflow)[-1] == "workflow.cancelled"
    assert workflow_events(workflow).count("workflow.cancelled") == 1


def test_cancelling_one_steps_job_fails_its_chain(db):
    workflow = create({"type": "chain", "steps": [job("a"), job("b")]})
    Job.objects.cancel(Job.objects.get(type="a").id)
    assert state(workflow) == "failed"
    assert nodes(workflow) == {"": "failed", "0": "cancelled", "1": "cancelled"}


def test_the_worker_batch_path_advances_once_per_batch(db):
    workflow = create({"type": "batch", "jobs": [job("a"), job("b", retry={"max_attempts": 1})],
                       "callbacks": {"on_complete": job("done", queue="cb")}})
    a, b = take(count=2)
    Job.objects.settle_many([Settlement(a.id, Lease("w1"), result="A"), Settlement(b.id, Lease("w1"), failure=BOOM)])
    [callback] = take("cb", count=5)
    assert callback.extra["parent_results"] == ["A", None]
    assert state(workflow) == "running"


def test_the_reaper_discarding_a_lapsed_last_attempt_advances_the_chain(db):
    workflow = create({"type": "chain", "steps": [job("a", retry={"max_attempts": 1}), job("b")]})
    claimed = take()[0]
    update(claimed, lease_expires_at=ago(seconds=1))
    assert Job.objects.requeue_lapsed(10) == 1
    assert Job.objects.get(id=claimed.id).state == "discarded"
    assert state(workflow) == "failed"


def test_an_expired_step_fails_its_workflow(db):
    workflow = create({"type": "group", "jobs": [job("a", expires_at="2000-01-01T00:00:00Z")]})
    assert Job.objects.expire_overdue(10) == 1
    assert state(workflow) == "failed"


def test_a_step_its_queue_refuses_fails_without_failing_the_ack(db):
    Queue.objects.create(name="full", max_size=1, overflow_policy="reject")
    Job.objects.push(parse_job({"type": "filler", "args": [], "options": {"queue": "full"}}))
    workflow = create({"type": "chain", "steps": [job("a"), job("b", queue="full")]})
    ack(take()[0], "fine")  # the ACK commits; the next step could not be enqueued
    assert Job.objects.get(type="a").state == "completed"
    assert state(workflow) == "failed"
    assert "could not enqueue" in WorkflowNode.objects.get(workflow=workflow, path="1").error["message"]


def test_retry_from_the_failed_step_finishes_the_workflow(db):
    workflow = create({"type": "chain", "steps": [job("a"), job("b", retry={"max_attempts": 1}), job("c")]})
    ack(take()[0], "A")
    fail(take()[0])
    assert state(workflow) == "failed"
    store.retry_step(workflow.id, "1")
    assert state(workflow) == "running"
    again = take()[0]
    assert (again.type, again.extra["parent_results"]) == ("b", ["A"])
    ack(again, "B")
    ack(take()[0])
    assert state(workflow) == "completed"
    with pytest.raises(InvalidTransition):
        store.retry_step(workflow.id, "1")


@pytest.mark.postgres
def test_two_workers_acking_the_last_two_jobs_at_once_fire_the_callback_exactly_once(transactional_db):
    for _ in range(15):
        workflow = create({"type": "batch", "jobs": [job("a", queue="race"), job("b", queue="race")],
                           "callbacks": {"on_complete": job("cb", queue="race-cb"),
                                         "on_success": job("ok", queue="race-cb")}})
        a, b = Job.objects.fetch(["race"], count=2, worker_id="w1")
        race([lambda a=a: ack(a, "A"), lambda b=b: ack(b, "B")])
        callbacks = list(Job.objects.filter(queue="race-cb").values_list("type", flat=True))
        assert sorted(callbacks) == ["cb", "ok"]
        assert workflow_events(workflow).count("workflow.callback_fired") == 2
        Job.objects.filter(queue="race-cb").delete()


@pytest.mark.postgres
def test_worker_batches_settling_steps_of_many_workflows_never_deadlock(transactional_db):
    """Two batches name the same workflows' steps in opposite orders: job rows then
    workflow rows, each in a fixed order, so one waits for the other."""
    for _ in range(10):
        flows = [create({"type": "group", "jobs": [job("a", queue="dl"), job("b", queue="dl")]}) for _ in range(3)]
        jobs = Job.objects.fetch(["dl"], count=6, worker_id="w1")
        one, other = jobs[::2], jobs[1::2]
        race([
            lambda one=one: Job.objects.settle_many([Settlement(j.id, Lease("w1"), result=1) for j in one]),
            lambda other=other: Job.objects.settle_many(
                [Settlement(j.id, Lease("w1"), result=2) for j in reversed(other)]
            ),
        ])
        assert {state(flow) for flow in flows} == {"completed"}


def test_a_step_dropped_to_make_room_in_a_bounded_queue_fails_its_workflow(db):
    Queue.objects.create(name="bounded", max_size=1, overflow_policy="drop_oldest")
    workflow = create({"type": "group", "jobs": [job("a", queue="bounded")]})
    Job.objects.push(parse_job({"type": "newer", "args": [], "options": {"queue": "bounded"}}))
    assert Job.objects.get(type="a").state == "discarded"
    assert state(workflow) == "failed"


def test_a_step_its_rate_limit_drops_fails_its_group(db):
    limit = {"key": "api", "concurrency": 1, "on_limit": "drop"}
    workflow = create({"type": "group", "jobs": [job("a", rate_limit=limit), job("b", rate_limit=limit)]})
    take(count=2)
    assert Job.objects.get(type="b").state == "discarded"
    assert nodes(workflow)["1"] == "failed"


def test_ended_workflows_are_pruned_after_their_retention_running_ones_never(db):
    ended = create({"type": "group", "jobs": [job("a")]})
    ack(take()[0])
    running = create({"type": "group", "jobs": [job("b")]})
    Workflow.objects.update(finished_at=ago(days=8), created_at=ago(days=9))
    assert Job.objects.prune(100)["workflows"] == 1
    assert list(Workflow.objects.values_list("id", flat=True)) == [running.id]
    assert not WorkflowNode.objects.filter(workflow_id=ended.id).exists()


@pytest.mark.parametrize("move", ["cancel", "discard"])
def test_a_bulk_move_by_filter_advances_the_workflows_of_the_steps_it_ends(db, move):
    from django_ojs.core import bulk

    workflow = create({"type": "chain", "steps": [job("a"), job("b")]})
    report = bulk.bulk_move(Job.objects.filter(type="a"), move)
    assert report.moved == 1
    assert state(workflow) == "failed"
    assert nodes(workflow)["0"] == ("cancelled" if move == "cancel" else "failed")


def shaped(shape: str, size: int) -> dict[str, Any]:
    """A workflow of ``size`` steps: a chain, a fan-out (one step, every other one after it) or
    layers of ten steps, each after every step of the layer before."""
    if shape == "chain":
        return {"type": "chain", "steps": [job(f"s{index}") for index in range(size)]}
    steps = []
    for index in range(size):
        before = range(index // 10 * 10 - 10, index // 10 * 10) if index >= 10 else []
        parents = (["0"] if index else []) if shape == "fanout" else [str(i) for i in before]
        steps.append({"id": str(index), "depends_on": parents, **job(f"s{index}")})
    return {"steps": steps}


class NodeRowsRead:
    """How many workflow node rows the store reads into Python meanwhile (each is one model instance)."""

    def __enter__(self) -> NodeRowsRead:
        from django.db.models.signals import post_init

        self.count = 0
        post_init.connect(self.seen, sender=WorkflowNode)
        return self

    def seen(self, **kwargs: Any) -> None:
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        from django.db.models.signals import post_init

        post_init.disconnect(self.seen, sender=WorkflowNode)


@pytest.mark.parametrize("shape", ["fanout", "chain", "layered"])
def test_a_steps_ack_reads_no_more_in_a_workflow_of_a_thousand_steps_than_of_ten(db, shape):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def cost(size: int) -> tuple[int, int, bool]:
        create(shaped(shape, size))
        if shape == "fanout":
            ack(take()[0])  # starts the other steps: the one ACK that touches them all
        # The ACK measured: a fan-out's step among many running, a chain's first step, the last of a layer.
        first = take(count=5 if shape == "fanout" else 10)
        for claimed in first[1:]:
            ack(claimed, {"step": claimed.type})
        with CaptureQueriesContext(connection) as queries, NodeRowsRead() as rows:
            ack(first[0], {"step": first[0].type})
        assert len(take(count=1000)) == {"fanout": size - 6, "chain": 1, "layered": 10}[shape]
        Job.objects.all().delete()
        # The statements on the workflow tables (a push's own reads of queue settings come and go with their
        # cache), and whether one read the definition (parsed once per process: create's stays).
        ours = [query["sql"] for query in queries.captured_queries if "django_ojs_workflow" in query["sql"]]
        return len(ours), rows.count, any(re.search(r'"definition"(, "| FROM)', sql) for sql in ours)

    assert cost(20) == cost(1000)
    assert not cost(1000)[2]


@pytest.mark.parametrize("writer", ["this release", "the release before"])
def test_a_step_added_after_the_definition_was_parsed_counts_for_its_group(db, writer):
    """Each process keeps a workflow's parsed tree by the revision stored in its definition; adding
    jobs writes a new one, and the release before, which knew no revision, wrote none."""
    workflow = create({"type": "group", "jobs": [job("a")]})
    first = take()[0]
    store.add_jobs(workflow.id, {"jobs": [job("b")]})
    if writer == "the release before":
        definition = Workflow.objects.get(id=workflow.id).definition
        Workflow.objects.filter(id=workflow.id).update(definition={k: v for k, v in definition.items() if k != "revision"})
    ack(first)
    assert state(workflow) == "running"
    ack(take()[0])
    assert state(workflow) == "completed"
