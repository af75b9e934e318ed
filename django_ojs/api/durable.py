"""Durable steps on the wire (a django-ojs extension, ``durable-steps`` in the manifest).

``PUT /ojs/v1/jobs/{id}/steps/{name}`` records that a step of the attempt the
body names completed, with its result. The checkpoint half of durable jobs is
a member of the progress report (``api/progress.py``).
"""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from ..core.durable import record_step
from ..protocol.durable import check_step_name, check_step_result, render_step
from ..protocol.envelope import parse_job_ref
from ..protocol.errors import InvalidRequest
from .base import OJSView
from .requests import lease_attempt, worker_id


class StepView(OJSView):
    """Record a completed step on the lease (job, attempt[, worker]) the body names.

    200 with ``recorded: true`` for a new record, ``recorded: false`` and the
    record as it was for a step recorded before (the PUT is idempotent: the
    first result stays). 409 when the attempt no longer holds the job: the
    worker must stop, its work belongs to no live attempt.
    """

    required_scope = "worker"

    def put(self, request: Any, job_id: str, name: str) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise InvalidRequest("the step body must be a JSON object", field="body")
        attempt = lease_attempt(body, required=True)
        assert attempt is not None  # required
        worker = worker_id(body.get("worker_id"), required=False)
        result = body.get("result")
        check_step_result(result)
        step, recorded = record_step(
            parse_job_ref(job_id, "id"), check_step_name(name), result, attempt=attempt, worker_id=worker
        )
        return Response({"job_id": str(parse_job_ref(job_id, "id")), "step": render_step(step), "recorded": recorded})
