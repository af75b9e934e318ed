"""PUSH, batch PUSH, INFO, CANCEL and ACTIVATE (ojs-http-binding §9)."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.response import Response

from ..conf import ojs_settings
from ..envelope import parse_batch, parse_job, parse_job_ref, render_job
from ..models import Job
from ..retry import parse_policy
from .base import OJSView


def default_retry():
    """The project's default policy (``OJS["DEFAULT_RETRY"]``) over ojs-retry §8."""
    return parse_policy(ojs_settings.DEFAULT_RETRY or None, field="OJS['DEFAULT_RETRY']")


def job_location(job: Job) -> str:
    return f"/ojs/v1/jobs/{job.id}"


class PushView(OJSView):
    required_scope = "enqueue"

    def post(self, request: Any) -> Response:
        spec = parse_job(
            self.body(),
            default_queue=ojs_settings.DEFAULT_QUEUE,
            default_retry=default_retry(),
            max_bytes=ojs_settings.MAX_ENVELOPE_BYTES,
            size=getattr(self, "body_size", None),
        )
        job = Job.objects.push(spec)
        return Response({"job": render_job(job)}, status=201, headers={"Location": job_location(job)})


class BatchView(OJSView):
    required_scope = "enqueue"

    @property
    def max_body_bytes(self) -> int:
        return ojs_settings.MAX_BATCH_BYTES

    def post(self, request: Any) -> Response:
        body = self.body()
        envelope_limit = ojs_settings.MAX_ENVELOPE_BYTES
        sizes = None
        # Only a body larger than one envelope can hold an oversized job.
        if getattr(self, "body_size", 0) > envelope_limit and isinstance(body.get("jobs"), list):
            # As sent: UTF-8, not \uXXXX escapes, which triple non-ASCII text.
            sizes = [len(json.dumps(job, separators=(",", ":"), ensure_ascii=False).encode()) for job in body["jobs"]]
        specs = parse_batch(
            body,
            max_jobs=ojs_settings.MAX_BATCH_SIZE,
            max_bytes=envelope_limit,
            sizes=sizes,
            default_queue=ojs_settings.DEFAULT_QUEUE,
            default_retry=default_retry(),
        )
        jobs = Job.objects.push_many(specs)
        return Response({"jobs": [render_job(job) for job in jobs], "count": len(jobs)}, status=201)


class JobView(OJSView):
    required_scope = {"GET": "read", "DELETE": "enqueue"}

    def get(self, request: Any, job_id: str) -> Response:
        job = _get_job(job_id)
        return Response({"job": render_job(job, errors=job.errors.all())})

    def delete(self, request: Any, job_id: str) -> Response:
        job, previous = Job.objects.cancel(parse_job_ref(job_id, "id"))
        body = render_job(job)
        if previous is not None:
            body["previous_state"] = previous
        return Response({"job": body})


class ActivateView(OJSView):
    required_scope = "enqueue"

    def post(self, request: Any, job_id: str) -> Response:
        job = Job.objects.activate(parse_job_ref(job_id, "id"))
        body = render_job(job)
        body.update(previous_state="pending", activated_at=body.get("enqueued_at"))
        return Response({"job": body})


def _get_job(job_id: str) -> Job:
    from ..errors import NotFound

    ref = parse_job_ref(job_id, "id")
    job = Job.objects.filter(id=ref).first()
    if job is None:
        raise NotFound(f"job {job_id} not found", details={"resource_type": "job", "resource_id": job_id})
    return job
