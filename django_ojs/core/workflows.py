"""Workflows in the store: create, advance, cancel, retry a failed step.

``advance`` is the one hook the settle paths call (ACK, FAIL, the worker's
batches, the reaper's recoveries, expiry, cancellation) with the jobs they
just moved, inside the transaction that moved them. So the next step is
enqueued, a group counted and a callback fired in the same commit as the
job's outcome, or not at all: a crash between steps leaves nothing to
repair, and nothing can happen twice.

Lock order (DESIGN invariant 11): the settle path holds its job rows (locked
in ``seq`` order); ``advance`` then locks the rows of the workflows they
belong to, in ``id`` order. No path takes a workflow row before job rows:
``cancel`` and ``retry_step`` lock the jobs they will touch first, and start
over when the workflow moved on meanwhile. Only the workflow's own row is
locked, so unrelated workflows never wait for each other; its counters are
counted from its node rows.

An ACK reads only the node rows its advance needs (``_load(lazily=True)``,
the engine's ``LazyStates``): the settled steps, the steps that depend on
them and their other dependencies, the results passed on. Whether a
container's members all ended is asked of the store (``_unended``) without
reading them, and the tree is parsed once per process and definition
(``_shape``), so the cost of a step's ACK does not grow with its workflow.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.db.models.fields.json import KeyTextTransform
from uuid6 import uuid7

from ..conf import ojs_settings
from ..models import Job, Workflow, WorkflowNode
from ..protocol.durations import to_millis
from ..protocol.envelope import parse_job
from ..protocol.errors import InvalidRequest, InvalidTransition, NotFound, OJSError
from ..protocol.states import TERMINAL, JobState
from ..protocol.workflows import (
    CALLBACKS,
    CANCELLED,
    COMPLETED,
    DONE,
    FAILED,
    PENDING,
    RUNNING,
    WAITING,
    Engine,
    Enqueue,
    LazyStates,
    Node,
    NodeState,
    Shape,
    parse_added,
    shown_state,
)
from . import events
from .clock import db_now
from .moves import cancel_rows
from .row_movement import retried_on_row_movement
from .row_updates import update_rows

# What a step's job ending in a terminal state means for the step.
OUTCOME: dict[str, str] = {JobState.COMPLETED: COMPLETED, JobState.DISCARDED: FAILED, JobState.CANCELLED: CANCELLED}
_NODE_FIELDS = ["state", "inputs", "result", "error", "job_seq", "job_id", "started_at", "finished_at"]
_OPEN = (WAITING, PENDING, RUNNING)
# The definition's own version: a new one each time it is written (create, add_jobs), so a parsed
# tree is known by it. The release before rewrote definitions without it: those are parsed each time.
_REVISION = "revision"
_SHAPES: OrderedDict[tuple[Any, str], Shape] = OrderedDict()
_SHAPES_KEPT = 64
_SHAPES_LOCK = threading.Lock()


def job_options() -> dict[str, Any]:
    """How the jobs of a workflow are parsed: the same defaults as a PUSH."""
    return {
        "default_queue": ojs_settings.DEFAULT_QUEUE,
        "default_retry": ojs_settings.retry_policy(),
        "max_bytes": ojs_settings.MAX_ENVELOPE_BYTES,
    }


def create(root: Node) -> Workflow:
    """Store a parsed workflow and enqueue its first jobs, in one transaction.

    Inside a caller's ``transaction.atomic()`` it commits or rolls back with
    the caller's rows, like any enqueue.
    """
    with transaction.atomic():
        now = db_now()
        workflow = Workflow.objects.create(
            id=uuid7(),
            type=root.kind,
            name=root.name,
            # Running from creation: its first jobs are enqueued now (docs/explanation/decisions.md).
            state=RUNNING,
            definition=_stored(root),
            created_at=now,
            started_at=now,
        )
        engine = Engine.fresh(root)
        _remember(workflow, engine.shape)
        planned = engine.start()
        WorkflowNode.objects.bulk_create(
            WorkflowNode(workflow=workflow, path=node.path, kind=node.kind, type=node.type[:255], state="waiting")
            for node in root.walk()
        )
        nodes = {node.path: node for node in workflow.nodes.all()}
        # Refused jobs (a full queue...) refuse the whole workflow: nothing ran yet.
        _run(workflow, engine, nodes, planned, now, strict=True)
        total = len(root.children)
        events.record(
            [
                _event("workflow.created", workflow, now),
                _event("workflow.started", workflow, now, total_steps=total),
            ]
        )
    return workflow


def advance(settled: Mapping[int, str], *, steps: Collection[int] | None = None) -> None:
    """Move the workflows of jobs that just reached a terminal state (``{seq: state}``).

    Called inside the settling transaction, after the job rows are written
    and while they are locked. Jobs that are not workflow steps cost one
    index probe per call, and nothing when none of them is terminal -- or
    when the caller names the ``steps`` among them (``workflow_step``, read
    while locking them: a step's node exists before its job is claimed) and
    there is none.
    """
    done = {seq: state for seq, state in settled.items() if state in TERMINAL and (steps is None or seq in steps)}
    if not done:
        return
    ids = set(
        WorkflowNode.objects.filter(job_seq__in=list(done), state=PENDING).values_list("workflow_id", flat=True)
    )
    if not ids:
        return
    now = db_now()
    locked = (Workflow.objects.select_for_update().filter(id__in=ids, state=RUNNING).order_by("id")
              .defer("definition").annotate(revision=KeyTextTransform(_REVISION, "definition")))
    for workflow in locked:
        _advance(workflow, done, now)


def workflow_step() -> Any:
    """An expression for a job query: is the job a pending workflow step? (``advance``'s ``steps``)."""
    return Exists(WorkflowNode.objects.filter(job_seq=OuterRef("seq"), state=PENDING))


def _advance(workflow: Workflow, done: Mapping[int, str], now: dt.datetime) -> None:
    engine, nodes = _load(workflow, lazily=True)
    # The settled steps, and the root every advance reads, in one query.
    read = list(WorkflowNode.objects.filter(Q(job_seq__in=list(done), state=PENDING) | Q(path=""), workflow=workflow)
                .order_by("job_seq"))
    engine.states.update({node.path: _state_of(node) for node in read})
    nodes.update({node.path: node for node in read})
    mine = [node for node in read if node.path and node.job_seq in done and node.state == PENDING]
    jobs: dict[int | None, Job] = {
        job.seq: job
        for job in Job.objects.filter(seq__in=[node.job_seq for node in mine]).only(
            "seq", "state", "result", "error"
        )
    }
    planned: list[Enqueue] = []
    for node in mine:
        job = jobs.get(node.job_seq)
        if job is None or job.state not in OUTCOME:
            continue
        planned += engine.settle(node.path, OUTCOME[job.state], result=job.result, error=job.error)
    _run(workflow, engine, nodes, planned, now)


def _load(workflow: Workflow, *, lazily: bool = False) -> tuple[Engine, dict[str, Any]]:
    """The workflow's engine and its node rows by path: every row, or (``lazily``) each row
    the first time the engine asks for its state."""
    if not lazily:
        every = {node.path: node for node in workflow.nodes.all()}
        states = {path: _state_of(node) for path, node in every.items()}
        return Engine(Node.from_dict(workflow.definition), states), every
    nodes: dict[str, Any] = {}

    def load(paths: list[str]) -> dict[str, NodeState]:
        rows = {node.path: node for node in WorkflowNode.objects.filter(workflow=workflow, path__in=paths)}
        nodes.update(rows)
        return {path: _state_of(node) for path, node in rows.items()}

    def unended(container: Node, read: set[str]) -> bool:
        rows = WorkflowNode.objects.filter(workflow=workflow, state__in=_OPEN)
        if container.path:
            rows = rows.filter(path__startswith=container.path + ".")
        skipped = {container.path, *read, *(callback.path for callback in container.callbacks.values())}
        return rows.exclude(path__in=skipped).exists()

    return Engine(_shape(workflow), LazyStates(load, unended)), nodes


def _stored(root: Node) -> dict[str, Any]:
    """A workflow's definition as stored: its tree and a new revision."""
    return {**root.to_dict(), _REVISION: uuid7().hex}


def _shape(workflow: Workflow) -> Shape:
    """The workflow's parsed tree, parsed once per process and revision (``advance`` reads the
    revision with the row, not the definition). A shape is shared: only advances read it, and
    they never change it (``add_jobs`` grows a tree of its own)."""
    revision: str | None = getattr(workflow, "revision", None)
    with _SHAPES_LOCK:
        shape = _SHAPES.get((workflow.id, revision)) if revision else None
        if shape is not None and revision:
            _SHAPES.move_to_end((workflow.id, revision))
            return shape
    definition = Workflow.objects.filter(id=workflow.id).values_list("definition", flat=True).get()
    shape = Shape(Node.from_dict(definition))
    if revision and definition.get(_REVISION) == revision:
        _remember(workflow, shape, revision)
    return shape


def _remember(workflow: Workflow, shape: Shape, revision: str | None = None) -> None:
    with _SHAPES_LOCK:
        _SHAPES[(workflow.id, revision or workflow.definition[_REVISION])] = shape
        while len(_SHAPES) > _SHAPES_KEPT:
            _SHAPES.popitem(last=False)


def _state_of(node: WorkflowNode) -> NodeState:
    return NodeState(state=node.state, inputs=node.inputs, result=node.result, error=node.error)


def _run(
    workflow: Workflow,
    engine: Engine,
    nodes: dict[str, Any],
    planned: list[Enqueue],
    now: dt.datetime,
    *,
    strict: bool = False,
) -> None:
    """Enqueue the planned jobs, write what changed, record the events.

    A job the store refuses while the workflow runs (its queue is full, a
    queue name now invalid...) fails its step, as a job that failed would:
    the settling transaction must commit whatever a step's enqueue does.
    """
    # Imported here: a push can end other jobs (a bounded queue drops its
    # oldest, a unique job replaces its holder), whose workflows advance --
    # push and advance call each other, so one of them imports at call time.
    from .push import push, push_many

    while planned:
        specs = [_spec(workflow, item) for item in planned]
        try:
            jobs: list[Job | None] = list(push_many(specs))
            more: list[Enqueue] = []
        except OJSError:
            if strict:
                raise
            jobs, more = [], []
            for item, spec in zip(planned, specs):
                try:
                    jobs.append(push(spec))
                except OJSError as exc:
                    jobs.append(None)
                    error = {"type": exc.code, "code": exc.code, "message": f"could not enqueue: {exc.message}"}
                    more += engine.settle(item.node.path, FAILED, error=error)
        if workflow.signals:
            # A step started after a signal was sent to its workflow has it from the start.
            Job.objects.filter(seq__in=[job.seq for job in jobs if job is not None]).update(signals=workflow.signals)
        for item, job in zip(planned, jobs):
            if job is not None:
                node = nodes[item.node.path]
                node.job_seq, node.job_id = job.seq, job.id
        planned = more
    _write(workflow, engine, nodes, now)


def _spec(workflow: Workflow, item: Enqueue):
    spec = parse_job(item.node.body, **job_options())
    # Echoed at the top of the job envelope (ojs-workflows §7.1 JobContext):
    # the results before it, in step order, and where it belongs.
    spec.extra = {
        **spec.extra,
        "parent_results": item.parent_results,
        "workflow_id": str(workflow.id),
        "workflow_step": item.node.path,
    }
    return spec


def _write(workflow: Workflow, engine: Engine, nodes: dict[str, Any], now: dt.datetime) -> None:
    changed = []
    for path in sorted(engine.changed):
        node, state = nodes[path], engine.states[path]
        if state.state != "waiting" and node.started_at is None:
            node.started_at = now
        if state.state in DONE and node.finished_at is None:
            node.finished_at = now
        elif state.state not in DONE:
            node.finished_at = None
        node.state, node.inputs, node.result, node.error = state.state, state.inputs, state.result, state.error
        changed.append(node)
    if changed:
        update_rows(WorkflowNode.objects.all(), changed, _NODE_FIELDS)
    batch = [_node_event(workflow, what, node, nodes, now) for what, node in engine.events]
    finished = engine.finished
    if finished and workflow.state != finished:
        workflow.state = finished
        workflow.finished_at = now
        workflow.save(update_fields=["state", "finished_at"])
        extra: dict[str, Any] = {"total_steps": len(engine.root.children),
                                 "duration_ms": to_millis(now - workflow.created_at)}
        if finished == FAILED:
            extra.update(failure_report(workflow, WorkflowNode.objects.filter(workflow=workflow, state=FAILED).order_by("id")))
        batch.append(_event(f"workflow.{finished}", workflow, now, **extra))
    elif workflow.state != RUNNING and not finished:
        workflow.state, workflow.finished_at = RUNNING, None
        workflow.save(update_fields=["state", "finished_at"])
    events.record(filter(None, batch))


def _node_event(workflow: Workflow, what: str, node: Node, nodes: dict[str, Any], now: dt.datetime):
    row = nodes[node.path]
    if what == "added":
        return _event("workflow.job_added", workflow, now, step_id=node.path, step_type=node.type,
                      job_id=str(row.job_id) if row.job_id else None)
    if what == "callback_fired":
        return _event("workflow.callback_fired", workflow, now, callback=node.path.rsplit(".", 1)[-1],
                      step_id=node.path, step_type=node.type)
    if node.kind != "job" or what not in (COMPLETED, FAILED):
        return None
    data: dict[str, Any] = {"step_id": node.path, "step_type": node.type, "job_id": str(row.job_id)}
    if row.started_at:
        data["duration_ms"] = to_millis(now - row.started_at)
    if what == FAILED:
        data["error"] = row.error
    return _event(f"workflow.step_{what}", workflow, now, **data)


def _event(kind: str, workflow: Workflow, now: dt.datetime, **data: Any):
    return events.other_event(
        kind, now, workflow_id=str(workflow.id), workflow_name=workflow.name, workflow_type=workflow.type, **data
    )


def failure_report(workflow: Workflow, nodes: Iterable[Any]) -> dict[str, Any]:
    """ojs-workflows §9.6: which jobs failed, and why."""
    failed = [node for node in nodes if node.kind == "job" and node.state == FAILED]
    report: dict[str, Any] = {
        "failed_job_ids": [str(node.job_id) for node in failed if node.job_id],
        "errors": [
            {
                "job_id": str(node.job_id) if node.job_id else None,
                "step_id": node.path,
                "code": (node.error or {}).get("code") or (node.error or {}).get("type") or "unknown",
                "message": (node.error or {}).get("message", ""),
                "attempt": (node.error or {}).get("attempt"),
            }
            for node in failed
        ],
    }
    steps = sorted(int(node.path.split(".")[0]) for node in failed if node.path.split(".")[0].isdigit())
    if workflow.type == "chain" and steps:
        report["failed_step_index"] = steps[0]
    return report


# -- growing a batch -------------------------------------------------------------


def add_jobs(workflow_id: Any, body: object, *, into: str = "") -> tuple[Workflow, list[Job]]:
    """Add jobs to a running batch or group of a workflow (``into``: its path, "" the root); enqueue them.

    The callbacks of a batch fire once, after every job -- those added
    included -- has ended. Lock order (invariant 11): only the workflow's row,
    as ``retry_step`` takes it, then the new jobs are pushed; a settle path
    holds its job rows and then waits for that row. So the last original
    job ending while jobs are added is decided by who locks the row first:
    the add commits first and the settle path counts the added jobs (no
    callback yet), or the settle path fires the callbacks first and the add
    reads them fired and is refused (409). Never early, never twice.
    """
    with transaction.atomic():
        workflow = locked_workflow(workflow_id, allow_failed=False)
        engine, nodes = _load(workflow)
        if isinstance(into, str) and into in engine.nodes and engine.nodes[into].kind in ("group", "batch"):
            refusal = engine.growable(into)
        else:
            raise InvalidRequest(f"workflow {workflow.id} has no batch or group at {into!r}", field="into")
        if refusal is not None:
            raise InvalidTransition(
                f"jobs cannot be added to workflow {workflow.id}: {refusal}", job_id=str(workflow.id),
                current_state=workflow.state,
            )
        room = ojs_settings.MAX_BATCH_SIZE - len(engine.root.leaves())
        bodies = parse_added(body, room=room, job_options=job_options())
        planned = engine.grow(into, bodies)
        workflow.definition = _stored(engine.root)
        workflow.save(update_fields=["definition"])
        for item in planned:
            nodes[item.node.path] = WorkflowNode.objects.create(
                workflow=workflow, path=item.node.path, kind="job", type=item.node.type[:255], state="waiting"
            )
        now = db_now()
        _run(workflow, engine, nodes, planned, now, strict=True)
        seqs = [nodes[item.node.path].job_seq for item in planned]
    jobs = {job.seq: job for job in Job.objects.filter(seq__in=seqs)}
    return workflow, [jobs[seq] for seq in seqs if seq in jobs]


def step_counts(workflow: Workflow, rows: Mapping[str, WorkflowNode] | None = None) -> dict[str, int]:
    """The workflow's own steps (its top level's members: a chain's or DAG's steps, a group's
    or batch's jobs), ``total``, ``completed`` and ``failed``; a nested group is one step.

    What ``GET /ojs/v1/workflows/{id}`` (``steps_*``, ``jobs_*``) and the admin's
    "steps done" say; ``job_counts`` counts every job. ``rows``: the workflow's node rows by
    path, when the caller has them."""
    members = [child.path for child in Node.from_dict(workflow.definition).children]
    if rows is None:
        rows = {row.path: row for row in WorkflowNode.objects.filter(workflow=workflow, path__in=members)
                .only("path", "state")}
    states = [rows[path].state for path in members]
    return {"total": len(states), "completed": states.count(COMPLETED), "failed": states.count(FAILED)}


def job_counts(workflow: Workflow) -> dict[str, Any]:
    """A workflow's jobs by state, its callbacks left out and jobs added while it ran included.

    What the admin, ``manage.py ojs workflow`` and ``GET /ojs/v1/workflows/{id}``
    (``jobs_by_state``) say: ``total``, ``ended`` (completed, failed, cancelled or
    skipped), ``share_ended`` (0 to 1) and ``by_state``, each state as a step shows
    it (``active`` while its job runs, ojs-workflows §4.4).
    """
    rows = [row for row in WorkflowNode.objects.filter(workflow=workflow, kind="job").only("path", "state", "job_seq")
            if row.path.rsplit(".", 1)[-1] not in CALLBACKS]
    live = dict(Job.objects.filter(seq__in=[row.job_seq for row in rows if row.state == PENDING and row.job_seq])
                .values_list("seq", "state"))
    by_state: dict[str, int] = {}
    for row in rows:
        shown = shown_state(row.state, live.get(row.job_seq) if row.job_seq is not None else None)
        by_state[shown] = by_state.get(shown, 0) + 1
    ended = sum(count for state, count in by_state.items() if state in DONE)
    return {"total": len(rows), "ended": ended, "share_ended": ended / len(rows) if rows else 0.0,
            "by_state": dict(sorted(by_state.items()))}


def enclosing(step: str) -> str:
    """The path of the container a workflow step belongs to ("" for the root)."""
    return step.rsplit(".", 1)[0] if "." in step else ""


# -- operator moves ------------------------------------------------------------


class Moved(Exception):
    """The workflow started other jobs while we locked the ones we saw: look again."""


@retried_on_row_movement
def cancel(workflow_id: Any) -> tuple[Workflow, dict[str, int]]:
    """Cancel a running workflow and every job of it not yet ended (ojs-workflows §11.3).

    Active jobs are cancelled too, as DELETE /jobs/{id} does: their worker
    learns it from its next heartbeat. 409 on a workflow already ended.
    """
    for _ in range(20):
        try:
            with transaction.atomic():
                seqs = [
                    seq
                    for seq in WorkflowNode.objects.filter(workflow_id=workflow_id, state=PENDING)
                    .values_list("job_seq", flat=True)
                    if seq is not None
                ]
                # Job rows first, in seq order; then the workflow's row.
                locked = list(Job.objects.select_for_update().filter(seq__in=seqs).order_by("seq"))
                workflow = locked_workflow(workflow_id, allow_failed=False)
                engine, nodes = _load(workflow)
                open_jobs = engine.cancel()
                if {nodes[node.path].job_seq for node in open_jobs} - {job.seq for job in locked}:
                    raise Moved
                now = db_now()
                cancel_rows([job for job in locked if job.state not in TERMINAL], now)
                _write(workflow, engine, nodes, now)  # the workflow ends cancelled, with its event
                counts = {
                    "steps_cancelled": sum(1 for n in nodes.values() if n.kind == "job" and n.state == CANCELLED),
                    "steps_already_completed": sum(
                        1 for n in nodes.values() if n.kind == "job" and n.state == COMPLETED
                    ),
                }
                return workflow, counts
        except Moved:
            continue
    raise InvalidTransition(
        f"workflow {workflow_id} kept moving; try again", job_id=str(workflow_id), current_state=RUNNING
    )


@retried_on_row_movement
def retry_step(workflow_id: Any, path: str) -> Workflow:
    """Run a failed step again and let its workflow go on from there (the admin's action).

    A new job replaces the failed one, with the same parent_results; the
    workflow is running again until it ends anew.
    """
    with transaction.atomic():
        workflow = locked_workflow(workflow_id, allow_failed=True)
        if workflow.state not in (FAILED, RUNNING):
            raise InvalidTransition(
                f"workflow {workflow.id} is {workflow.state}; only a failed step of a failed or running "
                "workflow can be retried",
                job_id=str(workflow.id),
                current_state=workflow.state,
            )
        engine, nodes = _load(workflow)
        if path not in nodes or not retryable(nodes[path]):
            raise InvalidTransition(
                f"step {path!r} of workflow {workflow.id} has not failed", job_id=str(workflow.id),
                current_state=workflow.state,
            )
        try:
            planned = engine.retry(path)
        except (KeyError, ValueError) as exc:
            raise InvalidTransition(
                f"step {path!r} of workflow {workflow.id} has not failed", job_id=str(workflow.id),
                current_state=workflow.state,
            ) from exc
        now = db_now()
        _run(workflow, engine, nodes, planned, now, strict=True)
        workflow.refresh_from_db()
        events.record([_event("workflow.step_retried", workflow, now, step_id=path)])
    return Workflow.objects.get(id=workflow.id)


def retryable(node: Any) -> bool:
    """A step can run again if its job failed or was cancelled (not one that never ran)."""
    return node.kind == "job" and (node.state == FAILED or (node.state == CANCELLED and node.job_seq is not None))


def locked_workflow(workflow_id: Any, *, allow_failed: bool) -> Workflow:
    workflow = Workflow.objects.select_for_update().filter(id=workflow_id).first()
    if workflow is None:
        raise NotFound(
            f"workflow {workflow_id} not found",
            details={"resource_type": "workflow", "resource_id": str(workflow_id)},
        )
    if workflow.state in DONE and not (allow_failed and workflow.state == FAILED):
        raise InvalidTransition(
            f"workflow {workflow.id} is already in terminal state {workflow.state!r}",
            job_id=str(workflow.id),
            current_state=workflow.state,
        )
    return workflow

