"""GET /ojs/v1/jobs/{id}/progress/stream (ojs-progress §7.2) through real gunicorn.

Server-sent events from a WSGI thread: an event when the progress changes, a
final one when the job ends, then the stream closes; bounded in time and in
how many one process serves at once (503 beyond, never a starved server).
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass, field

import pytest

import django_ojs
from django_ojs.core.progress import report_progress
from django_ojs.core.types import Lease
from django_ojs.models import ApiKey, Job
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.progress import Report
from tests.admin.browser import ojs_worker
from tests.api.gunicorn import Wire, serving
from tests.waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@dataclass
class Stream:
    """One open progress stream, read event by event."""

    connection: http.client.HTTPConnection
    response: http.client.HTTPResponse
    retry: str = ""
    comments: list[str] = field(default_factory=list)

    def next_event(self) -> tuple[str, dict] | None:
        """The next event (name, data), or None when the server closed the stream."""
        name, data = "", ""
        while True:
            line = self.response.readline().decode()
            if not line:
                return None
            line = line.rstrip("\n")
            if line.startswith("retry: "):
                self.retry = line[len("retry: "):]
            elif line.startswith(":"):
                self.comments.append(line)
            elif line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = line[len("data: "):]
            elif line == "" and name:
                return name, json.loads(data)

    def close(self) -> None:
        self.connection.close()


def open_stream(wire: Wire, job_id: str) -> tuple[int, http.client.HTTPResponse, http.client.HTTPConnection]:
    connection = http.client.HTTPConnection("127.0.0.1", wire.port, timeout=PATIENCE)
    connection.request("GET", f"/ojs/v1/jobs/{job_id}/progress/stream",
                       headers={"Authorization": f"Bearer {wire.key}", "Accept": "text/event-stream"})
    response = connection.getresponse()
    return response.status, response, connection


def stream(wire: Wire, job_id: str) -> Stream:
    status, response, connection = open_stream(wire, job_id)
    assert status == 200, response.read()
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["Cache-Control"] == "no-cache"
    return Stream(connection, response)


def active_job(push, worker_id: str = "w1", **options) -> Job:
    pushed = push(type="stream.job", options={"queue": "streamed", **options})
    [job] = Job.objects.fetch(["streamed"], worker_id=worker_id)
    assert job.id == pushed.id
    return job


@pytest.fixture
def key(transactional_db) -> str:
    return ApiKey.objects.issue("stream reader", ["read"])[1]


def test_the_stream_sends_each_change_then_the_final_event_and_closes(key, push):
    job = active_job(push)
    with serving(key, threads=4) as wire:
        events = stream(wire, str(job.id))
        name, first = events.next_event()
        assert events.retry == "2000"  # EventSource reconnects this long after a close
        assert (name, first["job_id"], first["state"], first["progress"], first["message"]) == (
            "progress", str(job.id), "active", None, None)
        assert report_progress(job.id, Report(0.4, {"rows": 40}, "loading"), attempt=1, worker_id="w1")
        name, moved = events.next_event()
        assert (name, moved["progress"], moved["data"], moved["message"]) == ("progress", 0.4, {"rows": 40}, "loading")
        assert moved["updated_at"] == wire_progress(wire, job)["updated_at"]  # the stream and GET agree
        Job.objects.ack(job.id, lease=Lease(worker_id="w1"))
        name, final = events.next_event()
        assert (name, final["state"], final["progress"], final["message"]) == ("completed", "completed", 1.0, "loading")
        assert events.next_event() is None  # §7.2: then the connection closes
        events.close()


def wire_progress(wire: Wire, job: Job) -> dict:
    status, _, body = wire.send("GET", f"/ojs/v1/jobs/{job.id}/progress")
    assert status == 200
    return json.loads(body)


def test_a_real_workers_handler_moves_the_stream_and_its_return_ends_it(key, tmp_path):
    # Imported here, as tests/admin/test_browser.py does: registering its handlers at
    # collection would put them in every other test's registry.
    from tests.admin.worker_app.jobs import PROGRESS

    release = tmp_path / "release"
    job = django_ojs.enqueue(PROGRESS, [str(release)], queue="stream-e2e")
    with serving(key, threads=2) as wire, ojs_worker("stream-e2e"):
        events = stream(wire, str(job.id))
        name, body = events.next_event()
        while body["progress"] is None:  # waiting, then claimed: each change is an event
            assert name == "progress"
            name, body = events.next_event()
        # The handler's ctx.progress(0.42, {...}, message=...), as the worker wrote it.
        assert (name, body["state"], body["progress"], body["message"]) == (
            "progress", "active", 0.42, "copying rows 1-420")
        release.touch()
        name, final = events.next_event()
        assert (name, final["state"], final["progress"]) == ("completed", "completed", 1.0)
        assert events.next_event() is None
        events.close()


def test_a_failed_or_cancelled_job_ends_its_stream_with_that_event(key, push):
    failed, cancelled = active_job(push, retry={"max_attempts": 1}), active_job(push)
    Job.objects.fail(failed.id, Failure(type="Boom", message="no"), lease=Lease(worker_id="w1"))
    Job.objects.cancel(cancelled.id)
    with serving(key, threads=2) as wire:
        for job, event in ((failed, "failed"), (cancelled, "cancelled")):
            events = stream(wire, str(job.id))
            assert events.next_event()[0] == event
            assert events.next_event() is None
            events.close()


def test_one_more_stream_than_a_process_serves_is_503_and_the_server_still_answers(key, push):
    job = active_job(push)
    with serving(key, threads=4, environment={"OJS_PROGRESS_STREAMS": "2"}) as wire:
        held = [stream(wire, str(job.id)) for _ in range(2)]
        for events in held:
            assert events.next_event()[0] == "progress"
        status, response, connection = open_stream(wire, str(job.id))
        body = json.loads(response.read())
        connection.close()
        assert (status, response.headers["Retry-After"]) == (503, "5")
        assert (body["error"]["code"], body["error"]["details"]["max_streams"]) == ("backend_unavailable", 2)
        # The threads the streams do not hold still serve everything else.
        assert wire.send("GET", f"/ojs/v1/jobs/{job.id}/progress")[0] == 200
        # A client that leaves gives its slot back once the server writes to it.
        held.pop().close()
        moves = iter(range(1, 1000))

        def a_stream_is_served() -> bool:
            report_progress(job.id, Report(next(moves) / 1000), attempt=1, worker_id="w1")
            status, _, connection = open_stream(wire, str(job.id))
            connection.close()
            return status == 200

        wait_until(a_stream_is_served, PATIENCE, "the slot of the stream whose client left", interval=0.2)
        held[0].close()
        # The job ends: every stream still open on the server ends with it, and the server stops at once.
        Job.objects.ack(job.id, lease=Lease("w1", job.attempt))


def test_a_stream_closes_after_its_longest_time(key, push):
    job = active_job(push)
    with serving(key, threads=2, environment={"OJS_PROGRESS_STREAM_SECONDS": "1.5"}) as wire:
        events = stream(wire, str(job.id))
        started = time.monotonic()
        assert events.next_event()[0] == "progress"
        assert events.next_event() is None  # closed while the job is still active: the client reconnects
        assert time.monotonic() - started >= 1.0
        assert Job.objects.get(pk=job.pk).state == "active"
        events.close()
