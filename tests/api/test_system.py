"""Health, manifest, events feed, the test reset, unknown paths, headers and versions."""

from __future__ import annotations

import os

import pytest

from django_ojs.models import CronJob, Event, Job, JobError, Queue, Worker
from django_ojs.protocol.failure import Failure
from tests.conftest import OJSClient

UNKNOWN = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


# --- health and manifest ---------------------------------------------------------------


def test_health_answers_without_credentials(db):
    response = OJSClient(None).get("/ojs/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["version"], body["backend"]["status"]) == ("ok", "1.0", "connected")
    assert body["backend"]["type"] in ("postgres", "sqlite")
    # Binding §8.1 and openapi: an integer number of milliseconds.
    assert type(body["backend"]["latency_ms"]) is int and body["backend"]["latency_ms"] >= 0


def test_the_manifest_answers_without_credentials_in_both_spellings(db):
    body = OJSClient(None).get("/ojs/manifest").json()
    assert (body["specversion"], body["ojs_version"], body["conformance_level"]) == ("1.0", "1.0", 4)
    assert body["protocols"] == ["http"]
    assert body["implementation"]["language"] == "python"
    assert body["capabilities"]["events"] is True
    assert body["auth"] == {"scheme": "bearer", "required": True}


def test_the_manifest_announces_the_progress_features_served(api, claim):
    progress = OJSClient(None).get("/ojs/manifest").json()["capabilities"]["progress"]
    assert progress["members"] == ["progress", "data", "message", "checkpoint"]
    assert (progress["checkpoints"], progress["event_milestones"]) == (True, [0.25, 0.5, 0.75, 1.0])
    # The bounds it announces are the ones the server holds to.
    job = claim("w1")
    over = {"message": "x" * (progress["max_message_chars"] + 1)}
    assert api.put(f"/ojs/v1/jobs/{job.id}/progress", over).status_code == 400
    at = {"message": "x" * progress["max_message_chars"]}
    assert api.put(f"/ojs/v1/jobs/{job.id}/progress", at).status_code == 200
    # And the endpoints it names are served.
    for path in (progress["stream"], progress["workflow_progress"]):
        assert api.get(path.replace("{id}", "not-an-id")).status_code == 400
    big = {"checkpoint": {"x": "y" * progress["max_checkpoint_bytes"]}}
    assert api.put(f"/ojs/v1/jobs/{job.id}/progress", big).status_code == 400


def test_the_manifest_announces_durable_steps_with_the_bounds_held_to(api, claim):
    manifest = OJSClient(None).get("/ojs/manifest").json()
    assert "durable-steps" in manifest["extensions"]
    steps = manifest["capabilities"]["durable_steps"]
    job = claim("w1")
    path = steps["record"].replace("{id}", str(job.id))
    too_long = path.replace("{name}", "x" * (steps["max_name_chars"] + 1))
    assert api.put(too_long, {"attempt": 1}).status_code == 400
    too_big = {"attempt": 1, "result": "x" * steps["max_result_bytes"]}
    assert api.put(path.replace("{name}", "a"), too_big).status_code == 400
    assert api.put(path.replace("{name}", "a"), {"attempt": 1, "result": 1}).status_code == 200
    assert api.put(path.replace("{name}", "b"), {"attempt": 2}).status_code == steps["stale_attempt"]


# --- events feed -----------------------------------------------------------------------


@pytest.fixture
def history_of_events(push, claim):
    """One job enqueued in 'email', one completed in 'default', one failed in 'default'."""
    push(type="email.send", options={"queue": "email"})
    done = claim()
    Job.objects.ack(done.id)
    failed = claim(options={"retry": {"max_attempts": 1}})
    Job.objects.fail(failed.id, Failure(type="E", message=""))


def types_of(response):
    return [event["type"] for event in response.json()["events"]]


def test_the_event_feed_lists_events_oldest_first_in_the_cloudevents_envelope(api, push):
    job = push(type="email.send")
    [event] = api.get("/ojs/v1/events").json()["events"]
    assert (event["type"], event["subject"], event["specversion"], event["source"]) == (
        "job.enqueued", str(job.id), "1.0", "ojs://django-ojs")
    assert event["id"].startswith("evt_") and event["time"].endswith("Z")
    assert event["data"]["job_type"] == "email.send"


def test_the_feeds_event_ids_are_uuidv7s_unique_time_ordered_and_the_same_on_every_read(api, history_of_events):
    import uuid

    first = [event["id"] for event in api.get("/ojs/v1/events").json()["events"]]
    ids = [uuid.UUID(shown.removeprefix("evt_")) for shown in first]
    assert len(ids) > 3 and len(set(ids)) == len(ids) and ids == sorted(ids)
    assert all(made.version == 7 for made in ids)
    assert [event["id"] for event in api.get("/ojs/v1/events").json()["events"]] == first


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("types=job.completed", ["job.completed"]),
        ("types=job.completed,job.discarded", ["job.completed", "job.discarded"]),
        ("types=job.*&queues=email", ["job.enqueued"]),
        ("queues=email", ["job.enqueued"]),
        ("job_types=email.send", ["job.enqueued"]),
        ("types=worker.*", []),
    ],
)
def test_the_event_feed_filters(api, history_of_events, query, expected):
    assert types_of(api.get(f"/ojs/v1/events?{query}")) == expected


def test_the_event_feed_pages_with_its_cursor(api, history_of_events):
    everything = types_of(api.get("/ojs/v1/events?limit=1000"))
    first = api.get("/ojs/v1/events?limit=3").json()
    assert first["has_more"] is True
    rest = api.get(f"/ojs/v1/events?limit=1000&after={first['cursor']}").json()
    assert [e["type"] for e in first["events"] + rest["events"]] == everything
    assert rest["has_more"] is False
    # Polling again with the last cursor yields nothing new, and keeps the cursor.
    again = api.get(f"/ojs/v1/events?after={rest['cursor']}").json()
    assert (again["events"], again["cursor"]) == ([], rest["cursor"])


@pytest.mark.parametrize("query", ["after=abc", "after=-1", "limit=0", "limit=1001", "limit=x", "cursor=1.5"])
def test_bad_event_feed_parameters_are_400(api, query):
    assert api.get(f"/ojs/v1/events?{query}").status_code == 400


# --- the test reset ------------------------------------------------------------------


def test_the_reset_endpoint_does_not_exist_without_test_hooks(api, push):
    push()
    response = api.post("/ojs/v1/_test/reset")
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
    assert Job.objects.count() == 1


def test_the_reset_endpoint_empties_the_store_with_test_hooks(transactional_db, api, claim, ojs):
    # transactional_db: PostgreSQL refuses TRUNCATE in the transaction that inserted the rows.
    ojs(TEST_HOOKS=True)
    job = claim("w1", options={"retry": {"max_attempts": 1}})
    Job.objects.fail(job.id, Failure(type="E", message=""))
    Worker.objects.register("w1")
    api.post("/ojs/v1/cron", {"name": "c", "expression": "* * * * *", "job_template": {"type": "a", "args": []}})
    Queue.objects.pause("paused")
    assert api.post("/ojs/v1/_test/reset").json() == {"reset": True}
    for model in (Job, JobError, Worker, CronJob, Event):
        assert not model.objects.exists(), model
    assert not Queue.objects.filter(paused=True).exists()
    # The store works afterwards.
    assert api.post("/ojs/v1/jobs", {"type": "a", "args": []}).status_code == 201


# --- paths, methods, headers, versions ----------------------------------------------


@pytest.mark.parametrize("path", ["/ojs/v1/nothing", "/ojs/v1/jobs/a/b/c", "/ojs/v2/jobs", "/ojs/", "/ojs/v1/jobs/"])
def test_unknown_paths_are_a_json_404(api, path):
    response = api.get(path)
    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")


def test_a_method_the_endpoint_does_not_serve_is_405(api):
    response = api.get("/ojs/v1/jobs")
    assert (response.status_code, response.json()["error"]["code"]) == (405, "method_not_allowed")


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/ojs/v1/health"), ("get", "/ojs/manifest"), ("get", "/ojs/v1/queues"), ("post", "/ojs/v1/jobs"),
     ("get", f"/ojs/v1/jobs/{UNKNOWN}"), ("delete", f"/ojs/v1/jobs/{UNKNOWN}"), ("get", "/ojs/v1/nowhere")],
)
def test_every_response_echoes_a_valid_client_request_id(api, method, path):
    response = getattr(api, method)(path, HTTP_X_REQUEST_ID="client-trace-42")
    assert response["X-Request-Id"] == "client-trace-42" or path == "/ojs/v1/nowhere"
    if response.status_code >= 400 and path != "/ojs/v1/nowhere":
        assert response.json()["error"]["request_id"] == "client-trace-42"


def test_the_server_makes_a_request_id_when_the_clients_is_unusable(api):
    for given in ("", "x" * 200, "has space"):
        response = api.get("/ojs/v1/queues", HTTP_X_REQUEST_ID=given)
        assert response["X-Request-Id"].startswith("req_")


def test_request_ids_are_unique(api):
    ids = {api.get("/ojs/v1/queues")["X-Request-Id"] for _ in range(5)}
    assert len(ids) == 5


@pytest.mark.parametrize(("method", "path", "body"), [
    ("get", "/ojs/v1/jobs/{}", None),
    ("delete", "/ojs/v1/jobs/{}", None),
    ("post", "/ojs/v1/jobs/{}/activate", None),
    ("post", "/ojs/v1/workers/ack", {"job_id": "{}"}),
    ("post", "/ojs/v1/workers/nack", {"job_id": "{}", "error": {"code": "x", "message": ""}}),
    ("get", "/ojs/v1/dead-letter/{}", None),
    ("post", "/ojs/v1/dead-letter/{}/retry", None),
    ("delete", "/ojs/v1/dead-letter/{}", None),
])
def test_every_endpoint_naming_an_unknown_job_answers_404(api, method, path, body):
    if body is not None:
        body = {k: v.format(UNKNOWN) if isinstance(v, str) else v for k, v in body.items()}
    send = getattr(api, method)
    response = send(path.format(UNKNOWN), body) if method == "post" else send(path.format(UNKNOWN))
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["details"]["resource_id"]) == (404, "not_found", UNKNOWN)


def test_error_bodies_carry_every_field_of_the_binding(api):
    error = api.get(f"/ojs/v1/jobs/{UNKNOWN}").json()["error"]
    assert error["code"] == "not_found" and error["retryable"] is False
    assert error["hint"] and error["docs_url"].startswith("https://")
    assert error["details"] == {"resource_type": "job", "resource_id": UNKNOWN}


@pytest.mark.parametrize("version", ["2.0", "0.9", "2"])
def test_an_unsupported_ojs_version_is_422_unsupported(api, version):
    response = api.post("/ojs/v1/jobs", {"type": "a", "args": []}, HTTP_OJS_VERSION=version)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "unsupported" and error["details"]["supported_versions"] == ["1.0"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("version", ["1.0", "1", "1.1"])
def test_a_1_x_ojs_version_is_accepted(api, version):
    assert api.post("/ojs/v1/jobs", {"type": "a", "args": []}, HTTP_OJS_VERSION=version).status_code == 201


def test_the_response_media_type_can_be_plain_json_for_the_python_sdk(api, ojs):
    ojs(RESPONSE_MEDIA_TYPE="application/json")
    response = api.post("/ojs/v1/jobs", {"type": "a", "args": []})
    assert response["Content-Type"] == "application/json"
    assert api.get("/ojs/v1/nowhere")["Content-Type"] == "application/json"


def test_uptime_counts_from_the_process_start_not_from_the_first_request_to_the_api():
    """A server process imports the API's views at its first request to them: a gunicorn
    process that served other paths for a while must not say it has just started."""
    import subprocess
    import sys

    code = (
        "import time; time.sleep(2)\n"  # the process's life before its first API request
        "import django; django.setup()\n"
        "from django_ojs.api.system import uptime_seconds; print(uptime_seconds())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) >= 2
