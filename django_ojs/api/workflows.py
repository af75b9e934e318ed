"""Workflows over HTTP: create, inspect, cancel (ojs-http-binding §14, ojs-workflows §11)."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework.response import Response

from ..conf import ojs_settings
from ..core import maintenance_mode
from ..core import workflows as store
from ..core.progress import workflow_progress
from ..models import Job, Workflow
from ..protocol.durations import format_timestamp
from ..protocol.envelope import render_job
from ..protocol.errors import InvalidRequest, NotFound
from ..protocol.workflows import COMPLETED, FAILED, PENDING, Node, parse, shown_state
from .base import OJSView


class WorkflowCreateView(OJSView):
    required_scope = "enqueue"

    @property
    def max_body_bytes(self) -> int:
        return ojs_settings.MAX_BATCH_BYTES

    def post(self, request: Any) -> Response:
        maintenance_mode.refuse_pushes()
        root = parse(self.body(), max_jobs=ojs_settings.MAX_BATCH_SIZE, job_options=store.job_options())
        workflow = store.create(root)
        return Response(
            {"workflow": render_workflow(workflow)},
            status=201,
            headers={"Location": f"/ojs/v1/workflows/{workflow.id}"},
        )


class WorkflowView(OJSView):
    required_scope = {"GET": "read", "DELETE": "cancel"}

    def get(self, request: Any, workflow_id: str) -> Response:
        workflow = Workflow.objects.filter(id=parse_workflow_ref(workflow_id)).first()
        if workflow is None:
            raise _missing(workflow_id)
        return Response({"workflow": render_workflow(workflow)})

    def delete(self, request: Any, workflow_id: str) -> Response:
        workflow, counts = store.cancel(parse_workflow_ref(workflow_id))
        body = render_workflow(workflow)
        body.update(cancelled_at=body.get("completed_at"), **counts)
        body["metadata"]["cancelled_at"] = body.get("completed_at")
        return Response({"workflow": body})


class WorkflowJobsView(OJSView):
    """An extension: add jobs to a running batch or group (``{"jobs": [...], "into": path}``).

    ``into`` names the container by its path in the workflow (``"1"``, ``"0.2"``;
    omitted or ``""``: the workflow itself). 201 with the workflow and the jobs
    added; 409 once the group ended or the batch's callbacks fired.
    """

    required_scope = "enqueue"

    @property
    def max_body_bytes(self) -> int:
        return ojs_settings.MAX_BATCH_BYTES

    def post(self, request: Any, workflow_id: str) -> Response:
        maintenance_mode.refuse_pushes()
        body = self.body()
        into = body.get("into", "")
        if not isinstance(into, str):
            raise InvalidRequest("into must be the path of a batch or group in the workflow", field="into")
        workflow, jobs = store.add_jobs(parse_workflow_ref(workflow_id), body, into=into)
        return Response(
            {"workflow": render_workflow(workflow), "jobs": [render_job(job) for job in jobs]}, status=201,
        )


class WorkflowProgressView(OJSView):
    """ojs-progress §9.2: a workflow's aggregate progress and each step's."""

    required_scope = "read"

    def get(self, request: Any, workflow_id: str) -> Response:
        try:
            ref = uuid.UUID(workflow_id)
        except ValueError:
            raise InvalidRequest(
                "the workflow id must be a UUID such as '019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f'", field="id"
            ) from None
        workflow = Workflow.objects.filter(id=ref).first()
        if workflow is None:
            raise _missing(workflow_id)
        response = Response(workflow_progress(workflow))
        response["Cache-Control"] = "no-cache"  # §10.3: progress changes often
        return response


def parse_workflow_ref(value: str) -> uuid.UUID:
    """A workflow id from a path; 404 for anything that is not one."""
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise _missing(value) from None


def _missing(workflow_id: str) -> NotFound:
    return NotFound(
        f"workflow {workflow_id} not found", details={"resource_type": "workflow", "resource_id": workflow_id}
    )


def render_workflow(workflow: Workflow) -> dict[str, Any]:
    """The workflow, its counters, and every node with its job (ojs-workflows §11.2).

    Counters are counted from the node rows. The top level's members are
    ``steps`` for a chain or DAG and ``jobs`` for a group or batch, as the
    request named them; ``steps_*`` and ``jobs_*`` are both given for every
    type (openapi's Workflow has both), as are ojs-workflows §3.3's ``metadata``.
    """
    root = Node.from_dict(workflow.definition)
    rows = {row.path: row for row in workflow.nodes.all()}
    live = dict(
        Job.objects.filter(seq__in=[row.job_seq for row in rows.values() if row.state == PENDING and row.job_seq])
        .values_list("seq", "state")
    )
    leaves = [node for node in root.walk() if node.kind == "job" and node.path.split(".")[-1] not in _CALLBACKS]
    steps = store.step_counts(workflow, rows)
    out: dict[str, Any] = {
        "id": str(workflow.id),
        "type": workflow.type,
        "name": workflow.name,
        "state": workflow.state,
        "steps_total": steps["total"],
        "steps_completed": steps["completed"],
        "steps_failed": steps["failed"],
        "jobs_total": steps["total"],
        "jobs_completed": steps["completed"],
        "jobs_failed": steps["failed"],
        "created_at": format_timestamp(workflow.created_at),
    }
    if workflow.started_at:
        out["started_at"] = format_timestamp(workflow.started_at)
    if workflow.finished_at:
        out["completed_at"] = format_timestamp(workflow.finished_at)
    members_key = "jobs" if workflow.type in ("group", "batch") else "steps"
    out[members_key] = [_render_node(child, index, rows, live) for index, child in enumerate(root.children)]
    if root.kind == "dag":
        keys = [child.key for child in root.children]
        for child, entry in zip(root.children, out["steps"]):
            entry["depends_on"] = [keys[dep] for dep in child.deps]
    if root.callbacks:
        out["callbacks"] = {name: _render_node(node, None, rows, live) for name, node in root.callbacks.items()}
    out["metadata"] = {
        "created_at": out["created_at"],
        "started_at": out.get("started_at"),
        "completed_at": out.get("completed_at"),
        "job_count": len(leaves),
        "completed_count": sum(1 for node in leaves if rows[node.path].state == COMPLETED),
        "failed_count": sum(1 for node in leaves if rows[node.path].state == FAILED),
    }
    # A django-ojs extension: every job by state, nested and added ones included (core.workflows.job_counts).
    out["jobs_by_state"] = store.job_counts(workflow)
    if workflow.state == FAILED:
        out["error"] = store.failure_report(workflow, rows.values())
    return out


_CALLBACKS = ("on_complete", "on_success", "on_failure")


def _render_node(node: Node, index: int | None, rows: dict[str, Any], live: dict[int, str]) -> dict[str, Any]:
    row = rows[node.path]
    state = shown_state(row.state, live.get(row.job_seq))
    out: dict[str, Any] = {"path": node.path, "type": node.type, "kind": node.kind, "state": state}
    if index is not None:
        out["index"] = index
    if node.key:
        out["id"] = node.key
    if node.name:
        out["name"] = node.name
    if node.kind == "job":
        out["job_id"] = str(row.job_id) if row.job_id else None
        if row.result is not None:
            out["result"] = row.result
        if row.error:
            out["error"] = row.error
    else:
        key = "steps" if node.kind in ("chain", "dag") else "jobs"
        out[key] = [_render_node(child, i, rows, live) for i, child in enumerate(node.children)]
        if node.callbacks:
            out["callbacks"] = {name: _render_node(cb, None, rows, live) for name, cb in node.callbacks.items()}
    if row.started_at:
        out["started_at"] = format_timestamp(row.started_at)
    if row.finished_at:
        out["completed_at"] = format_timestamp(row.finished_at)
    return out

