"""Progress reports (ojs-progress): stored on the lease they name, as a heartbeat (§6);
read back for one job, a stream, or a workflow (§7, §9)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from django.db import transaction
from django.db.models import F, Value

from ..conf import ojs_settings
from ..models import Job, Workflow
from ..observe import signals
from ..protocol.durable import stored_checkpoint
from ..protocol.durations import format_timestamp, parse_timestamp
from ..protocol.progress import Report, aggregate, current, event_due, merge, view
from ..protocol.states import JobState
from ..protocol.workflows import COMPLETED, Node, shown_state
from . import events
from .clock import TxNow
from .row_movement import retried_on_row_movement


@retried_on_row_movement
def report_progress(job_id: Any, report: Report, *, attempt: int | None = None, worker_id: str | None = None) -> bool:
    """Record ``report`` for the active attempt it belongs to; False if it is not (ignored, §6.1).

    Acts on a lease: ``attempt`` (and ``worker_id``) must still hold the job,
    so a late report from an attempt the reaper recovered never lands on the
    next one. A plain report takes the row with SKIP LOCKED: progress is
    fire-and-forget and never waits behind the ACK or recovery that holds it.
    A report carrying a checkpoint waits for the row instead: the worker
    resumes from it, so False must mean the lease is gone, never "busy"
    (one row, no other lock held: it cannot deadlock). Every report is
    stored and extends the lease as a heartbeat would (§6.3); a
    ``job.progress`` event is recorded for the attempt's first report, each
    milestone crossed, and otherwise once per ``PROGRESS_EVENT_INTERVAL``.
    The checkpoint replaces the job's last one and outlives the attempt.
    """
    checkpointing = report.checkpoint is not None
    with transaction.atomic():
        # By id alone, the state checked here: a state condition let PostgreSQL walk an
        # index of states whose statistics predate the backlog (tests/core/test_query_plans.py).
        job = (
            Job.objects.select_for_update(skip_locked=not checkpointing)
            .filter(id=job_id)
            .only("seq", "id", "type", "queue", "state", "attempt", "worker_id", "progress")
            .annotate(db_now=TxNow())  # the transaction's instant, read with the row: no round trip of its own
            .first()
        )
        if job is None or job.state != JobState.ACTIVE or (attempt is not None and job.attempt != attempt):
            return False
        if worker_id and job.worker_id not in (None, worker_id):
            return False
        now = job.db_now
        stamp = format_timestamp(now) or ""
        changes: dict[str, Any] = {"lease_expires_at": Value(now) + F("visibility_timeout")}
        record = False
        if report.reports_progress:
            previous = current(job.progress, job.attempt)
            stored = merge(job.progress, job.attempt, report, stamp)
            record = event_due(previous, stored, _since(previous, now), ojs_settings.PROGRESS_EVENT_INTERVAL)
            if record:
                stored["event_at"] = stamp
            job.progress = changes["progress"] = stored
        if report.checkpoint is not None:
            changes["checkpoint"] = stored_checkpoint(job.attempt, report.checkpoint, stamp)
            signals.measure_after_commit("checkpoint_size_bytes", (job.type,), report.checkpoint_bytes)
        Job.objects.filter(seq=job.seq).update(**changes)
        if record:
            events.record([events.job_event(
                "job.progress",
                job,
                now,
                worker_id=job.worker_id,
                progress_percent=None if stored["progress"] is None else round(stored["progress"] * 100, 2),
                data=stored["data"],
                message=stored["message"],
            )])
    return True


def _since(previous: dict[str, Any] | None, now: dt.datetime) -> float | None:
    """Seconds since the attempt's last job.progress event, None if it has had none."""
    if not previous or not previous.get("event_at"):
        return None
    at = parse_timestamp(previous["event_at"], allow_relative=False)
    return (now - at).total_seconds() if isinstance(at, dt.datetime) else None


def workflow_progress(workflow: Workflow) -> dict[str, Any]:
    """A workflow's aggregate progress and each step's (ojs-progress §9).

    Steps are the workflow's members, nested containers with their own
    members and aggregate; callbacks (``on_success``...) are not steps and
    count nowhere, as in the workflow's ``metadata``. ``job_count`` and
    ``states`` count the jobs of those steps by the state each step shows.
    Two reads: the node rows, then their jobs by primary key (a pruned job
    reads as its step's state, with no progress).
    """
    root = Node.from_dict(workflow.definition)
    rows = {row.path: row for row in workflow.nodes.all()}
    seqs = [row.job_seq for row in rows.values() if row.job_seq]
    jobs = {job.seq: job for job in Job.objects.filter(seq__in=seqs).only("seq", "state", "attempt", "progress")}
    states: Counter[str] = Counter()

    def step(node: Node) -> dict[str, Any]:
        row = rows[node.path]
        if node.kind != "job":
            members = [step(child) for child in node.children]
            progress = aggregate(node.kind, [(member["state"], member["progress"]) for member in members])
            return {"path": node.path, "kind": node.kind, "state": row.state, "progress": progress, "steps": members}
        job = jobs.get(row.job_seq) if row.job_seq else None
        state = shown_state(row.state, job.state if job else None)
        states[state] += 1
        shown = view(job.state, job.attempt, job.progress) if job else {}
        out: dict[str, Any] = {
            "path": node.path,
            "job_id": str(row.job_id) if row.job_id else None,
            "type": node.type,
            "state": state,
            "progress": 1.0 if row.state == COMPLETED else shown.get("progress"),
        }
        for key in ("data", "message"):
            if shown.get(key) is not None:
                out[key] = shown[key]
        return out

    steps = [step(child) for child in root.children]
    return {
        "workflow_id": str(workflow.id),
        "type": workflow.type,
        "state": workflow.state,
        "progress": aggregate(root.kind, [(entry["state"], entry["progress"]) for entry in steps]),
        "job_count": sum(states.values()),
        "states": dict(sorted(states.items())),
        "steps": steps,
    }
