"""PUT/GET /ojs/v1/jobs/{id}/progress (ojs-progress §6-§8): a report is a heartbeat on its lease."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from django_ojs.api.progress import SLOTS
from django_ojs.conf import ojs_settings
from django_ojs.core.types import Lease
from django_ojs.models import Event, Job
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.progress import MAX_MESSAGE_CHARS
from tests.conftest import MEDIA_TYPE, OJSClient, check_binding_response
from tests.helpers import reload, row, update

pytestmark = pytest.mark.django_db


def url(job) -> str:
    return f"/ojs/v1/jobs/{job.id}/progress"


def test_no_progress_yet_reads_nulls_not_404(api, push):
    job = push()
    body = api.get(url(job)).json()
    assert (body["job_id"], body["state"], body["progress"], body["data"]) == (str(job.id), "available", None, None)


def test_an_unknown_job_is_404(api):
    assert api.get("/ojs/v1/jobs/019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f/progress").status_code == 404


def test_a_report_is_stored_clamped_monotonic_and_extends_the_lease(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    update(job, lease_expires_at=job.started_at)
    response = worker.put(url(job), {"progress": 1.7, "data": {"rows": 5}, "attempt": 1, "worker_id": "w1"})
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] is True
    assert response["X-OJS-Progress"] == "1.0"
    stored = reload(job)
    assert stored.lease_expires_at > job.started_at  # §6.3: a heartbeat
    worker.put(url(job), {"progress": 0.2})
    assert worker.get(url(job)).json()["progress"] == 1.0
    assert Event.objects.filter(type="job.progress", job_id=job.id).count() >= 1


def test_reports_on_another_lease_or_state_are_ignored_not_rejected(make_client, claim, push):
    worker = make_client("worker")
    job = claim("w1")
    assert worker.put(url(job), {"progress": 0.5, "attempt": 2}).json()["accepted"] is False
    assert worker.put(url(job), {"progress": 0.5, "worker_id": "w2"}).json()["accepted"] is False
    waiting = push()
    response = worker.put(url(waiting), {"progress": 0.5})
    assert (response.status_code, response.json()["accepted"]) == (200, False)
    assert reload(job).progress is None and reload(waiting).progress is None


def test_progress_is_one_on_completion_and_kept_on_failure(make_client, claim):
    worker = make_client("worker")
    done, failed = claim("w1"), claim("w1", options={"retry": {"max_attempts": 1}})
    for job in (done, failed):
        worker.put(url(job), {"progress": 0.4, "data": {"step": 2}})
    Job.objects.ack(done.id, lease=Lease(worker_id="w1"))
    Job.objects.fail(failed.id, Failure(type="Boom", message="x"), lease=Lease(worker_id="w1"))
    assert worker.get(url(done)).json()["progress"] == 1.0
    assert worker.get(url(failed)).json()[["progress", "data"][0]] == 0.4
    assert worker.get(url(failed)).json()["data"] == {"step": 2}


def put_raw(client, path: str, data: bytes):
    response = client.client.generic("PUT", path, data, content_type=MEDIA_TYPE)
    check_binding_response(response)
    return response


@pytest.mark.parametrize("body", [
    {"progress": "x"}, {}, {"progress": 0.1, "attempt": 0}, {"progress": 0.1, "worker_id": 3}, [0.5], "half",
    {"progress": 0.5, "message": 7}, {"message": "x" * (MAX_MESSAGE_CHARS + 1)}, {"data": [1, 2]},
    {"data": {"blob": "x" * 5000}}, {"colour": "red"}, {"message": "nul \u0000 inside"}, {"progress": 0.5, "message": None,
    "data": None, "attempt": True},
])
def test_bad_reports_are_400_and_change_nothing(make_client, claim, body):
    worker = make_client("worker")
    job = claim("w1")
    before = row(job)
    response = worker.put(url(job), body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert row(job) == before


@pytest.mark.parametrize(("raw", "status"), [
    (b'{"progress": NaN}', 400), (b'{"progress": Infinity}', 400), (b'{"progress": 1e999}', 400),
    (b'{"progress": 0.5', 400), (b'{"data": {"x": "' + b"y" * (2 * 1024 * 1024) + b'"}}', 413),
])
def test_unparseable_or_oversized_bodies_are_4xx_and_change_nothing(make_client, claim, raw, status):
    worker = make_client("worker")
    job = claim("w1")
    before = row(job)
    response = put_raw(worker, url(job), raw)
    assert response.status_code == status, response.content
    assert row(job) == before


def test_a_message_is_kept_beside_progress_and_data_and_unknown_members_are_ignored(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    sent = {"progress": 0.5, "message": "loading rows", "data": {"rows": 5}, "checkpoint": {"row": 5}, "eta": 30}
    response = worker.put(url(job), sent)
    assert response.status_code == 200, response.content
    assert (response.json()["accepted"], response.json()["message"]) == (True, "loading rows")
    worker.put(url(job), {"progress": 0.6})
    read = worker.get(url(job)).json()
    assert (read["progress"], read["message"], read["data"]) == (0.6, "loading rows", {"rows": 5})
    assert worker.put(url(job), {"message": "writing"}).json()["message"] == "writing"
    assert "eta" not in reload(job).progress


def test_no_progress_reads_a_null_message(api, push):
    assert api.get(url(push())).json()["message"] is None


def progress_events(job) -> list[dict]:
    return [event.data for event in Event.objects.filter(type="job.progress", job_id=job.id).order_by("seq")]


def test_events_are_throttled_to_the_first_report_milestones_and_the_interval(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    for value in (0.1, 0.12, 0.14, 0.3, 0.31, 0.32):
        worker.put(url(job), {"progress": value, "message": f"at {value}"})
    assert [(e["progress_percent"], e["message"]) for e in progress_events(job)] == [(10.0, "at 0.1"), (30.0, "at 0.3")]
    # The interval since the last event has passed: the next report records one.
    stored = reload(job).progress
    long_ago = dt.datetime.fromisoformat(stored["event_at"].replace("Z", "+00:00")) - dt.timedelta(
        seconds=ojs_settings.PROGRESS_EVENT_INTERVAL + 1)
    update(job, progress={**stored, "event_at": long_ago.isoformat().replace("+00:00", "Z")})
    worker.put(url(job), {"progress": 0.33})
    worker.put(url(job), {"progress": 0.34})
    assert [e["progress_percent"] for e in progress_events(job)] == [10.0, 30.0, 33.0]
    assert reload(job).progress["progress"] == 0.34  # the latest is always stored


def test_every_report_extends_the_lease_throttled_or_not(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    worker.put(url(job), {"progress": 0.1})
    events = len(progress_events(job))
    update(job, lease_expires_at=job.started_at)
    worker.put(url(job), {"progress": 0.11})
    assert len(progress_events(job)) == events  # no event for this one
    assert reload(job).lease_expires_at > job.started_at


def test_the_progress_event_carries_what_get_reads(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    worker.put(url(job), {"progress": 0.25, "data": {"rows": 25}, "message": "a quarter"})
    read = worker.get(url(job)).json()
    event = progress_events(job)[-1]
    assert (event["progress_percent"] / 100, event["data"], event["message"]) == (
        read["progress"], read["data"], read["message"])


def test_reporting_needs_the_worker_scope(make_client, claim):
    job = claim("w1")
    assert make_client("read").put(url(job), {"progress": 0.5}).status_code == 403


# -- the stream's refusals and a finished job's stream, in process (tests/api/test_progress_stream.py: on the wire)


def stream_url(job) -> str:
    return f"/ojs/v1/jobs/{job.id}/progress/stream"


@pytest.mark.parametrize(("path", "status"), [
    ("/ojs/v1/jobs/not-a-job/progress/stream", 400),
    ("/ojs/v1/jobs/019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f/progress/stream", 404),
])
def test_a_stream_of_a_malformed_or_unknown_job_is_refused_in_the_error_format(api, path, status):
    response = api.get(path)
    assert response.status_code == status
    assert response.json()["error"]["code"] == {400: "invalid_request", 404: "not_found"}[status]
    assert SLOTS.open == 0


def test_a_stream_needs_a_key_and_is_read_only(api, push):
    job = push()
    assert OJSClient(None).get(stream_url(job)).status_code == 401
    assert api.put(stream_url(job), {"progress": 0.5}).status_code == 405
    head = api.client.head(stream_url(job))  # not a stream run for an empty body
    assert (head.status_code, head["OJS-Version"], SLOTS.open) == (405, "1.0", 0)


def test_the_stream_of_a_finished_job_is_its_final_event_alone(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    worker.put(url(job), {"progress": 0.4, "message": "almost"})
    Job.objects.ack(job.id, lease=Lease(worker_id="w1"))
    response = make_client("read").get(stream_url(job))
    assert (response.status_code, response["Content-Type"]) == (200, "text/event-stream")
    text = b"".join(response.streaming_content).decode()
    retry, final = text.split("\n\n")[:2]
    assert retry == "retry: 2000"
    name, data = final.split("\n")
    assert name == "event: completed"
    body = json.loads(data.removeprefix("data: "))
    assert (body["state"], body["progress"], body["message"]) == ("completed", 1.0, "almost")
    assert body == worker.get(url(job)).json()  # the stream and GET agree
    assert SLOTS.open == 0
