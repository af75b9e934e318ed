"""A job's result, and the blocking wait for it (ojs-results §8.2, §10.3).

``GET /ojs/v1/jobs/{id}/result`` answers the job's result now;
``?wait=true&timeout=N`` holds the request until the job ends (200) or the
timeout passes (408, the job goes on). A held request holds a server thread,
so waits are bounded like the progress streams (``api/progress.py``): in
time (``OJS["RESULT_WAIT_MAX_SECONDS"]``, longer timeouts are cut to it) and
in number (``OJS["RESULT_WAITS"]`` per process, 503 with ``Retry-After``
beyond). The waiting itself is ``core/awaiting.py``'s, shared with
``job.wait()``: woken by LISTEN/NOTIFY on PostgreSQL, polling elsewhere.
"""

from __future__ import annotations

import math
from typing import Any

from rest_framework.response import Response

from ..conf import ojs_settings
from ..core import awaiting
from ..models import Job
from ..protocol.errors import InvalidRequest, WaitTimedOut
from ..protocol.states import TERMINAL, JobState
from .base import OJSView
from .jobs import find_job
from .progress import StreamSlots

# ojs-results §8.2: a blocking wait's default timeout, in seconds.
DEFAULT_TIMEOUT = 30
# What a client polling a job still running is asked to wait (ojs-results §8.1).
POLL_RETRY_AFTER = 1
FLAGS = {"true": True, "1": True, "false": False, "0": False}

SLOTS = StreamSlots("holds {limit} waits for a result", "poll GET /ojs/v1/jobs/{id}/result", "max_waits")


def result_body(job: Job) -> dict[str, Any]:
    """ojs-results §10.3: the job, its state and result; its last error when it ended without one."""
    body: dict[str, Any] = {"job_id": str(job.id), "state": job.state, "result": job.result}
    if job.state in (JobState.DISCARDED, JobState.CANCELLED) and job.error is not None:
        body["error"] = job.error
    return body


def parse_wait(params: Any) -> tuple[bool, float]:
    """``wait`` and ``timeout`` from the query: whether to block, and for how long (cut to the maximum)."""
    raw_wait = params.get("wait", "false")
    if raw_wait.lower() not in FLAGS:
        raise InvalidRequest("wait must be true or false", field="wait")
    raw_timeout = params.get("timeout")
    timeout = float(DEFAULT_TIMEOUT)
    if raw_timeout is not None:
        try:
            timeout = float(raw_timeout)
        except ValueError:
            timeout = math.nan
        if not math.isfinite(timeout) or timeout < 0:
            raise InvalidRequest("timeout must be a number of seconds, 0 or more", field="timeout")
    return FLAGS[raw_wait.lower()], min(timeout, float(ojs_settings.RESULT_WAIT_MAX_SECONDS))


class ResultView(OJSView):
    """ojs-results §8.2 and §10.2: a job's result, at once or once it ends."""

    required_scope = "read"
    http_method_names = ["get", "options"]

    def get(self, request: Any, job_id: str) -> Response:
        wait, timeout = parse_wait(request.query_params)
        job = find_job(job_id)
        method = "wait" if wait and job.state not in TERMINAL else "poll"
        if method == "wait":
            try:
                job = self._held(job, timeout)
            except WaitTimedOut as exc:
                _count(method, "timeout")
                raise exc  # 408, the binding's error body
        _count(method, job.state)
        response = Response(result_body(job))
        response["Cache-Control"] = "no-cache"
        if job.state not in TERMINAL:
            response["Retry-After"] = str(POLL_RETRY_AFTER)
        return response

    def _held(self, job: Job, timeout: float) -> Job:
        SLOTS.take(ojs_settings.RESULT_WAITS)
        try:
            return awaiting.wait(job.id, timeout)
        finally:
            SLOTS.give()


def _count(method: str, outcome: str) -> None:
    if ojs_settings.METRICS:
        from ..observe.metrics import count_result_retrieved  # the "prometheus" extra, only with metrics on

        count_result_retrieved(method, outcome)
