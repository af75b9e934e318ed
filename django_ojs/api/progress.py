"""Job progress on the wire (ojs-progress §6, §7): report it, read it, stream it.

The stream is server-sent events from a WSGI thread, so it is bounded twice:
in time (``OJS["PROGRESS_STREAM_SECONDS"]``, then the client reconnects as
``retry:`` told it) and in number (``OJS["PROGRESS_STREAMS"]`` per process,
503 beyond), so open streams can never take every thread gunicorn has.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from django.db import DatabaseError
from django.http import StreamingHttpResponse
from rest_framework.response import Response

from ..conf import ojs_settings
from ..core.progress import report_progress
from ..models import Job
from ..protocol.errors import Busy
from ..protocol.progress import parse, view
from ..protocol.states import JobState
from .base import OJSView
from .jobs import find_job
from .requests import lease_attempt, worker_id

logger = logging.getLogger("django_ojs.api")

# How long EventSource waits before reconnecting after the stream closes (ms).
RECONNECT_MS = 2000
# A comment line this often while nothing changes: proxies close connections
# idle for 60 s (nginx's proxy_read_timeout, AWS load balancers), and writing
# is how a stream whose client left finds out and frees its thread.
KEEPALIVE_SECONDS = 15.0
# What a client refused a stream or a wait is asked to wait: streams of jobs
# that end close at once, the others within PROGRESS_STREAM_SECONDS; waits
# end within their timeout.
BUSY_RETRY_AFTER = 5
# §7.2: the event that ends the stream, by the job's final state.
FINAL_EVENTS = {JobState.COMPLETED: "completed", JobState.DISCARDED: "failed", JobState.CANCELLED: "cancelled"}


def progress_body(job: Job) -> dict[str, Any]:
    """What GET /jobs/{id}/progress answers, and each stream event carries."""
    return {"job_id": str(job.id), "state": job.state, **view(job.state, job.attempt, job.progress)}


class ProgressView(OJSView):
    """ojs-progress §7.1 and §6.1: read a job's progress; report it (as a heartbeat).

    PUT acts on a lease when the body names one (``attempt``, ``worker_id``);
    a report for a job that is not active, or for an attempt that no longer
    holds it, is ignored (``"accepted": false``), never an error (§6.1). A
    report carrying a ``checkpoint`` (§6.4) is refused the same way: the
    worker reads ``accepted`` to know its checkpoint was not kept.
    """

    required_scope = {"GET": "read", "PUT": "worker"}

    def get(self, request: Any, job_id: str) -> Response:
        return _progress_response(find_job(job_id))

    def put(self, request: Any, job_id: str) -> Response:
        body = request.data
        report = parse(body)
        # Without an attempt a report (its checkpoint too) lands on whichever attempt holds
        # the job, as §6.4's example sends it; naming one is what refuses a stale checkpoint.
        attempt = lease_attempt(body)
        worker = worker_id(body.get("worker_id"), required=False)
        job = find_job(job_id)
        accepted = report_progress(job.id, report, attempt=attempt, worker_id=worker)
        return _progress_response(Job.objects.get(seq=job.seq), accepted=accepted)


def _progress_response(job: Job, **extra: Any) -> Response:
    body = progress_body(job)
    response = Response({**body, **extra})
    response["Cache-Control"] = "no-cache"
    if body["progress"] is not None:
        response["X-OJS-Progress"] = str(body["progress"])
    return response


class StreamSlots:
    """The long requests of one kind this process holds open, at most a limit at once.

    ``doing`` and ``instead`` word the 503 that refuses one more: what the
    process already does (``{limit}`` stands for the limit), and what a client may do instead.
    """

    def __init__(self, doing: str, instead: str, limit_name: str) -> None:
        self._lock = threading.Lock()
        self.open = 0
        self.doing, self.instead, self.limit_name = doing, instead, limit_name

    def take(self, limit: int) -> None:
        """Hold one slot, or raise Busy (503 with Retry-After) when ``limit`` are held."""
        with self._lock:
            if self.open < limit:
                self.open += 1
                return
        raise Busy(
            "this server process already " + self.doing.format(limit=limit),
            retry_after=BUSY_RETRY_AFTER,
            hint=f"Retry after Retry-After seconds, or {self.instead}.",
            details={self.limit_name: limit},
        )

    def give(self) -> None:
        with self._lock:
            self.open -= 1


SLOTS = StreamSlots("streams progress to {limit} clients", "poll GET /ojs/v1/jobs/{id}/progress", "max_streams")


class ProgressStreamView(OJSView):
    """ojs-progress §7.2: the job's progress as server-sent events until it ends."""

    required_scope = "read"
    # Not HEAD: Django would answer it by running the whole stream for an empty body.
    http_method_names = ["get", "options"]

    def get(self, request: Any, job_id: str) -> StreamingHttpResponse:
        job = find_job(job_id)
        SLOTS.take(ojs_settings.PROGRESS_STREAMS)
        stream = ProgressStream(job.seq, SLOTS)
        # The slot is given back by close(), which the WSGI server calls when the
        # response ends for any reason: the job ended, the time ran out, the client left.
        response = StreamingHttpResponse(stream, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass each event on as it is written
        return response


def frame(event: str, data: dict[str, Any]) -> str:
    """One server-sent event."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n\n"


class ProgressStream:
    """The events of one stream; ``close()`` gives its slot back (once)."""

    def __init__(self, seq: int, slots: StreamSlots):
        self.seq = seq
        self.slots = slots
        self.closed = False

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self.events()
        finally:
            self.close()

    def events(self) -> Iterator[str]:
        yield f"retry: {RECONNECT_MS}\n\n"
        started = time.monotonic()
        deadline = started + ojs_settings.PROGRESS_STREAM_SECONDS
        poll = ojs_settings.PROGRESS_STREAM_POLL_INTERVAL
        last: dict[str, Any] | None = None
        written = started
        while True:
            try:
                # Autocommit: each read sees what was committed since the last one.
                job = Job.objects.filter(seq=self.seq).only("seq", "id", "state", "attempt", "progress").first()
            except DatabaseError:
                # The headers are sent: no error reply is possible. Close; the client's
                # reconnect is answered 503 while the database is away.
                logger.warning("progress stream of job seq %s closed: the database failed", self.seq, exc_info=True)
                return
            if job is None:
                return  # pruned meanwhile: a reconnect answers 404
            body = progress_body(job)
            final = FINAL_EVENTS.get(JobState(job.state))
            if final is not None:
                yield frame(final, body)
                return
            now = time.monotonic()
            if body != last:
                yield frame("progress", body)
                last, written = body, now
            elif now - written >= KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"
                written = now
            if now >= deadline:
                return
            time.sleep(min(poll, deadline - now))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.slots.give()
