"""Snooze, waits and signals on the wire (this server's extension; docs/reference/http/waits.md).

A worker in any language snoozes its job or parks it waiting for a signal
with ``POST /workers/snooze`` and ``POST /workers/wait``, beside ACK and
NACK: endpoints of their own, not a member of ACK or NACK, because neither
ends the attempt as a completion or a failure and a server without the
extension must refuse them (404), not read them as a success or an error.
Producers deliver signals to a job or a workflow.
"""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from ..core import waits
from ..protocol.durations import format_timestamp
from ..protocol.envelope import parse_job_ref, render_job
from .base import OJSView
from .requests import parse_snooze, parse_wait
from .workflows import parse_workflow_ref, render_workflow


class SnoozeView(OJSView):
    """Put the held job back for ``delay`` seconds, its attempt not charged."""

    required_scope = "worker"

    def post(self, request: Any) -> Response:
        asked = parse_snooze(self.body())
        job = waits.snooze(asked.job_id, asked.delay, lease=asked.lease)
        rendered = render_job(job)
        return Response({
            "job_id": rendered["id"], "state": job.state, "snoozes": job.snoozes,
            "run_at": rendered.get("run_at"), "job": rendered,
        })


class WaitView(OJSView):
    """Wait for a signal: its payload now if delivered, ``timed_out`` past the wait's deadline
    (the job still held: the worker ACKs or NACKs it), else the job parked until one of them."""

    required_scope = "worker"

    def post(self, request: Any) -> Response:
        asked = parse_wait(self.body())
        assert asked.signal is not None  # parse_wait requires it
        job, outcome = waits.wait(asked.job_id, asked.signal, asked.delay, lease=asked.lease)
        body: dict[str, Any] = {
            "job_id": str(job.id), "signal": asked.signal, "state": job.state,
            "delivered": outcome.delivered, "timed_out": outcome.timed_out, "parked": outcome.parked,
            "until": format_timestamp(outcome.until),
        }
        if outcome.delivered:
            body["payload"] = outcome.payload
        return Response(body)


def _signal_body(view: OJSView) -> tuple[Any, Any]:
    """The signal's name and payload as sent; the core checks them (400 naming the field)."""
    body = view.body()
    return body.get("name"), body.get("payload")


class JobSignalView(OJSView):
    """Deliver a signal to a job: stored, and the job woken if it waits for it."""

    required_scope = "enqueue"

    def post(self, request: Any, job_id: str) -> Response:
        name, value = _signal_body(self)
        job = waits.signal(parse_job_ref(job_id, "id"), name, value)
        return Response({"job_id": str(job.id), "signal": name, "state": job.state, "job": render_job(job)})


class WorkflowSignalView(OJSView):
    """Deliver a signal to every unfinished job of a workflow; kept for its steps not yet started."""

    required_scope = "enqueue"

    def post(self, request: Any, workflow_id: str) -> Response:
        name, value = _signal_body(self)
        workflow, delivered = waits.signal_workflow(parse_workflow_ref(workflow_id), name, value)
        return Response({"workflow_id": str(workflow.id), "signal": name, "jobs_signalled": delivered,
                         "workflow": render_workflow(workflow)})
