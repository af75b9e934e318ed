"""PUSH, batch PUSH, INFO, CANCEL and ACTIVATE (ojs-http-binding §9)."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from ..conf import ojs_settings
from ..core import control, maintenance_mode
from ..core.durable import steps_of
from ..core.push import push, push_many
from ..models import Job
from ..observe.tracing import traced_push
from ..protocol.envelope import check_batch_size, parse_batch, parse_job, parse_job_ref, render_job
from ..protocol.errors import NotFound
from .base import AnsweringView, OJSView, Reply
from .media import admit_items


def job_location(job: Job) -> str:
    return f"/ojs/v1/jobs/{job.id}"


def render_pushed(job: Job) -> dict[str, Any]:
    """A PUSH reply's entry: the job, and what unique jobs did (ignore, replace)."""
    rendered = render_job(job)
    body: dict[str, Any] = {"job": rendered}
    if job.deduplicated:
        rendered["deduplicated"] = True
        body["deduplicated"] = True
    replaced = job.replaced_job_id
    if replaced is not None:
        rendered["replaced_job_id"] = str(replaced)
        body["replaced_job_id"] = str(replaced)
    return body


class PushView(AnsweringView):
    """PUSH. Served by ``api/lean.py`` (POST) and by DRF (any other method: 405, OPTIONS)."""

    required_scope = "enqueue"

    def answer(self, body: dict[str, Any]) -> Reply:
        maintenance_mode.refuse_pushes()
        spec = parse_job(
            body,
            default_queue=ojs_settings.DEFAULT_QUEUE,
            default_retry=ojs_settings.retry_policy(),
            max_bytes=ojs_settings.MAX_ENVELOPE_BYTES,
            size=getattr(self, "body_size", None),
        )
        job = traced_push([spec], lambda: [push(spec)])[0]
        reply = render_pushed(job)
        # ojs-unique-jobs §5.4: 200, not 201, when an existing job stands for this one.
        status = 200 if reply.get("deduplicated") else 201
        return Reply(reply, status, {"Location": job_location(job)})


class BatchView(OJSView):
    required_scope = "enqueue"

    @property
    def max_body_bytes(self) -> int:
        return ojs_settings.MAX_BATCH_BYTES

    def admit_body(self, data: Any) -> None:
        admit_items(data, "jobs", lambda jobs: check_batch_size(jobs, ojs_settings.MAX_BATCH_SIZE))

    def post(self, request: Any) -> Response:
        maintenance_mode.refuse_pushes()
        specs = parse_batch(
            self.body(),
            max_jobs=ojs_settings.MAX_BATCH_SIZE,
            default_queue=ojs_settings.DEFAULT_QUEUE,
            default_retry=ojs_settings.retry_policy(),
        )
        jobs = traced_push(specs, lambda: push_many(specs))
        entries = [render_pushed(job) for job in jobs]
        return Response(
            {
                "jobs": [entry["job"] for entry in entries],
                "count": len(jobs),
                "deduplicated": sum(1 for entry in entries if entry.get("deduplicated")),
            },
            status=201,
        )


class JobView(OJSView):
    required_scope = {"GET": "read", "DELETE": "cancel"}

    def get(self, request: Any, job_id: str) -> Response:
        job = find_job(job_id)
        return Response({"job": render_job(job, errors=job.errors.all(), steps=steps_of(job))})

    def delete(self, request: Any, job_id: str) -> Response:
        job, previous = control.cancel(parse_job_ref(job_id, "id"))
        body = render_job(job)
        if previous is not None:
            body["previous_state"] = previous
        return Response({"job": body})


class ActivateView(OJSView):
    required_scope = "enqueue"

    def post(self, request: Any, job_id: str) -> Response:
        job = control.activate(parse_job_ref(job_id, "id"))
        body = render_job(job)
        body.update(previous_state="pending", activated_at=body.get("enqueued_at"))
        return Response({"job": body})


def find_job(job_id: str) -> Job:
    ref = parse_job_ref(job_id, "id")
    job = Job.objects.filter(id=ref).first()
    if job is None:
        raise NotFound(f"job {job_id} not found", details={"resource_type": "job", "resource_id": job_id})
    return job
