"""PUSH, batch PUSH, INFO, CANCEL and ACTIVATE over HTTP (ojs-http-binding §9)."""

from __future__ import annotations

import json
import time
import tracemalloc
import uuid

import pytest

from django_ojs.models import Event, Job
from django_ojs.protocol.failure import Failure
from tests.conftest import MEDIA_TYPE

JOB_ID = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


def error_of(response):
    return response.json()["error"]


# --- PUSH ---------------------------------------------------------------------


def test_push_answers_201_with_location_and_the_full_envelope(api):
    response = api.post("/ojs/v1/jobs", {
        "type": "email.send", "args": ["a@example.com", {"locale": "en"}], "meta": {"trace_id": "t1"},
        "options": {"queue": "email", "priority": 3, "timeout_ms": 30000, "tags": ["onboarding"],
                    "retry": {"max_attempts": 5}},
    })
    assert response.status_code == 201
    job = response.json()["job"]
    assert response["Location"] == f"/ojs/v1/jobs/{job['id']}"
    assert uuid.UUID(job["id"]).version == 7
    assert {k: job[k] for k in ("specversion", "type", "args", "meta", "queue", "priority", "state", "attempt",
                                "max_attempts", "timeout_ms", "timeout", "tags")} == {
        "specversion": "1.0", "type": "email.send", "args": ["a@example.com", {"locale": "en"}],
        "meta": {"trace_id": "t1"}, "queue": "email", "priority": 3, "state": "available", "attempt": 0,
        "max_attempts": 5, "timeout_ms": 30000, "timeout": 30, "tags": ["onboarding"]}
    assert job["created_at"].endswith("Z") and job["enqueued_at"] == job["created_at"]
    assert job["retry"]["max_attempts"] == 5
    assert Job.objects.get(id=job["id"]).queue == "email"


def test_push_accepts_plain_json(api):
    response = api.post_raw("/ojs/v1/jobs", json.dumps({"type": "a", "args": []}), content_type="application/json")
    assert response.status_code == 201


def test_push_accepts_a_charset_parameter(api):
    response = api.post_raw("/ojs/v1/jobs", json.dumps({"type": "a", "args": []}),
                            content_type=f"{MEDIA_TYPE}; charset=utf-8")
    assert response.status_code == 201


def test_push_with_a_future_time_is_scheduled_and_echoes_it_verbatim(api):
    job = api.post("/ojs/v1/jobs", {"type": "a", "args": [], "options": {
        "delay_until": "2099-12-31T23:59:59+02:00", "expires_at": "2100-01-01T00:00:00Z"}}).json()["job"]
    assert job["state"] == "scheduled"
    assert (job["scheduled_at"], job["expires_at"]) == ("2099-12-31T23:59:59+02:00", "2100-01-01T00:00:00Z")
    assert job["run_at"] == "2099-12-31T21:59:59.000Z"


def test_push_with_pending_waits_for_activation(api):
    job = api.post("/ojs/v1/jobs", {"type": "a", "args": [], "options": {"pending": True}}).json()["job"]
    assert job["state"] == "pending" and "enqueued_at" not in job


def test_push_preserves_unknown_attributes_and_ignores_system_ones(api):
    job = api.post("/ojs/v1/jobs", {"type": "a", "args": [], "x_custom_field": {"k": [1]}, "state": "completed",
                                    "attempt": 9}).json()["job"]
    assert job["x_custom_field"] == {"k": [1]}
    assert (job["state"], job["attempt"]) == ("available", 0)
    assert api.get(f"/ojs/v1/jobs/{job['id']}").json()["job"]["x_custom_field"] == {"k": [1]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"args": []}, "type"),
        ({"type": "Email.Send", "args": []}, "type"),
        ({"type": 7, "args": []}, "type"),
        ({"type": "a"}, "args"),
        ({"type": "a", "args": {"to": "x"}}, "args"),
        ({"type": "a", "args": "x"}, "args"),
        ({"type": "a", "args": [], "id": "not-a-uuid"}, "id"),
        ({"type": "a", "args": [], "id": "0d0b3cd5-1b5c-4d3f-9a8b-7c6d5e4f3a2b"}, "id"),
        ({"type": "a", "args": [], "options": {"queue": "Bad Queue"}}, "options.queue"),
        ({"type": "a", "args": [], "options": {"priority": 101}}, "options.priority"),
        ({"type": "a", "args": [], "options": {"priority": -999999}}, "options.priority"),
        ({"type": "a", "args": [], "options": {"delay_until": "2030-01-01T00:00:00"}}, "options.delay_until"),
        ({"type": "a", "args": [], "options": {"expires_at": "9999-12-31T23:59:59-01:00"}}, "options.expires_at"),
        ({"type": "a", "args": [], "options": {"delay_until": "+P99999999D"}}, "options.delay_until"),
        ({"type": "a", "args": [], "options": {"timeout_ms": "fast"}}, "options.timeout_ms"),
        ({"type": "a", "args": [], "options": "fast"}, "options"),
        ({"type": "a", "args": [], "meta": ["x"]}, "meta"),
    ],
)
def test_push_refuses_invalid_fields_with_400_naming_the_field(api, body, field):
    response = api.post("/ojs/v1/jobs", body)
    assert response.status_code == 400
    error = error_of(response)
    assert (error["code"], error["details"]["field"], error["retryable"]) == ("invalid_request", field, False)
    assert not Job.objects.exists()


def test_push_with_args_of_the_wrong_type_says_what_it_received(api):
    error = error_of(api.post("/ojs/v1/jobs", {"type": "a", "args": {"to": "x"}}))
    assert (error["details"]["expected"], error["details"]["received"]) == ("array", "object")


@pytest.mark.parametrize("raw", ["{ invalid json }", '{"type": "a", "args": []', "", "\xff", "NaN",
                                 '{"type": "a", "args": [NaN]}', '{"type": "a", "args": [Infinity]}'])
def test_malformed_json_is_invalid_payload(api, raw):
    data = raw.encode("latin-1") if raw == "\xff" else raw
    response = api.post_raw("/ojs/v1/jobs", data)
    assert response.status_code == 400
    # An empty body is an empty object: it lacks `type`, which is a field error.
    assert error_of(response)["code"] == ("invalid_request" if raw == "" else "invalid_payload")
    assert not Job.objects.exists()


@pytest.mark.parametrize("raw", ["[]", '"job"', "42", "null", '[{"type": "a", "args": []}]'])
def test_a_body_that_is_not_an_object_is_refused(api, raw):
    response = api.post_raw("/ojs/v1/jobs", raw)
    assert (response.status_code, error_of(response)["code"]) == (400, "invalid_request")


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
def test_an_unsupported_content_type_is_400(api, content_type):
    response = api.post_raw("/ojs/v1/jobs", json.dumps({"type": "a", "args": []}), content_type=content_type)
    assert response.status_code == 400
    assert error_of(response)["details"]["field"] == "Content-Type"
    assert not Job.objects.exists()


def test_a_body_over_one_mebibyte_is_413(api):
    body = json.dumps({"type": "a", "args": ["x" * (1024 * 1024)]})
    response = api.post_raw("/ojs/v1/jobs", body)
    assert (response.status_code, error_of(response)["code"]) == (413, "payload_too_large")
    assert error_of(response)["details"]["max_size"] == 1024 * 1024
    assert not Job.objects.exists()


def test_a_body_just_under_the_limit_is_accepted(api):
    padding = 1024 * 1024 - len(json.dumps({"type": "a", "args": [""]}).encode())
    response = api.post_raw("/ojs/v1/jobs", json.dumps({"type": "a", "args": ["x" * padding]}))
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("retry", "mentions"),
    [
        ({"max_attempts": -1}, "max_attempts"),
        ({"backoff_coefficient": 0.5}, "backoff_coefficient"),
        ({"initial_interval": "PT10S", "max_interval": "PT1S"}, "max_interval"),
        ({"on_exhaustion": "explode"}, "on_exhaustion"),
        ({"backoff_strategy": "random"}, "backoff_strategy"),
    ],
)
def test_retry_policy_errors_are_422_validation_error(api, retry, mentions):
    response = api.post("/ojs/v1/jobs", {"type": "retry.test.bad-policy", "args": [], "options": {"retry": retry}})
    assert response.status_code == 422
    error = error_of(response)
    assert (error["code"], error["type"]) == ("validation_error", "validation_error")
    assert mentions in error["message"]
    assert error["details"]["field"].startswith("options.retry.")
    assert not Job.objects.exists()


def test_a_job_id_that_exists_is_409_duplicate(api):
    assert api.post("/ojs/v1/jobs", {"type": "a", "args": [], "id": JOB_ID}).status_code == 201
    response = api.post("/ojs/v1/jobs", {"type": "a", "args": [1], "id": JOB_ID})
    assert (response.status_code, error_of(response)["code"]) == (409, "duplicate")
    assert error_of(response)["details"]["existing_job_id"] == JOB_ID
    assert Job.objects.get().args == []


# --- batch ------------------------------------------------------------------------


def test_a_batch_enqueues_every_job_in_order(api):
    response = api.post("/ojs/v1/jobs/batch", {"jobs": [{"type": "a", "args": [n]} for n in range(3)]})
    assert response.status_code == 201
    body = response.json()
    assert body["count"] == 3
    assert [job["args"] for job in body["jobs"]] == [[0], [1], [2]]
    assert Job.objects.count() == 3


def test_a_batch_with_one_invalid_job_stores_nothing(api):
    response = api.post("/ojs/v1/jobs/batch", {"jobs": [{"type": "a", "args": []}, {"type": "a", "args": "x"}]})
    assert response.status_code == 400
    error = error_of(response)
    assert (error["details"]["field"], error["details"]["index"]) == ("jobs[1].args", 1)
    assert not Job.objects.exists()
    assert not Event.objects.exists()


def test_a_batch_with_an_invalid_retry_policy_stores_nothing(api):
    response = api.post("/ojs/v1/jobs/batch", {"jobs": [
        {"type": "a", "args": []}, {"type": "a", "args": [], "options": {"retry": {"max_attempts": -1}}}]})
    assert response.status_code == 422
    assert not Job.objects.exists()


def test_a_batch_repeating_an_id_stores_nothing(api):
    job = {"type": "a", "args": [], "id": JOB_ID}
    response = api.post("/ojs/v1/jobs/batch", {"jobs": [job, job]})
    assert response.status_code == 409
    assert not Job.objects.exists()


def test_a_batch_over_the_maximum_size_is_refused(api, ojs):
    ojs(MAX_BATCH_SIZE=2)
    response = api.post("/ojs/v1/jobs/batch", {"jobs": [{"type": "a", "args": []}] * 3})
    assert response.status_code == 400
    assert error_of(response)["details"]["max_jobs"] == 2
    assert not Job.objects.exists()
    assert api.post("/ojs/v1/jobs/batch", {"jobs": [{"type": "a", "args": []}] * 2}).status_code == 201


def test_a_batch_holding_one_oversized_job_is_413(api):
    response = api.post("/ojs/v1/jobs/batch", {"jobs": [{"type": "a", "args": []},
                                                        {"type": "a", "args": ["x" * (1024 * 1024)]}]})
    assert response.status_code == 413
    assert not Job.objects.exists()


def test_a_batch_measures_each_job_in_utf_8_as_a_single_push_does(api):
    # 400 kB as UTF-8 (1.2 MB if escaped as \u00e9): under the 1 MiB envelope limit.
    job = {"type": "a", "args": ["é" * 200_000]}
    utf8 = {"ensure_ascii": False}
    assert api.post_raw("/ojs/v1/jobs", json.dumps(job, **utf8).encode()).status_code == 201
    batch = json.dumps({"jobs": [job, job, job]}, **utf8).encode()
    assert len(batch) > 1024 * 1024
    assert api.post_raw("/ojs/v1/jobs/batch", batch).status_code == 201
    assert Job.objects.count() == 4


# 8.4 MB of one huge array: main once spent 577 MiB and 15 s walking it, a
# tuple and a path string per element, before counting the jobs.
HUGE_ARRAY = b",".join([b"0"] * 4_200_000)
HUGE_BATCHES = {
    "4.2 million jobs": (b'{"jobs":[' + HUGE_ARRAY + b"]}", 400, "invalid_request"),
    "one job of 4.2 million args": (b'{"jobs":[{"type":"a","args":[' + HUGE_ARRAY + b"]}]}", 413, "payload_too_large"),
}


@pytest.mark.parametrize("shape", HUGE_BATCHES)
def test_a_huge_batch_is_refused_in_memory_a_few_times_its_size(api, shape):
    body, status, code = HUGE_BATCHES[shape]
    tracemalloc.start()
    try:
        response = api.post_raw("/ojs/v1/jobs/batch", body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (response.status_code, error_of(response)["code"]) == (status, code)
    # The parsed list itself is 4 times the body (a pointer per 2-byte element);
    # the test client copies the body twice more.
    assert peak < 8 * len(body), f"peak {peak / 2**20:.0f} MiB for a {len(body) / 2**20:.1f} MiB body"
    assert not Job.objects.exists()


@pytest.mark.parametrize("shape", HUGE_BATCHES)
def test_a_huge_batch_is_refused_in_a_few_times_the_time_parsing_it_takes(api, shape):
    """Measured against the JSON parse of the same body on the same machine, so load cancels out."""
    body, status, _ = HUGE_BATCHES[shape]

    def fastest(action) -> float:
        times = []
        for _ in range(3):
            began = time.perf_counter()
            action()
            times.append(time.perf_counter() - began)
        return min(times)

    parse = fastest(lambda: json.loads(body))
    answer = fastest(lambda: api.post_raw("/ojs/v1/jobs/batch", body))
    assert api.post_raw("/ojs/v1/jobs/batch", body).status_code == status
    # Reading, parsing and refusing it: about one parse's worth (main took 8 to 60).
    assert answer < 4 * parse, f"answered in {answer:.2f} s; parsing alone takes {parse:.2f} s"


@pytest.mark.parametrize("body", [{}, {"jobs": []}, {"jobs": {"type": "a"}}, {"jobs": [["a"]]}])
def test_a_batch_needs_an_array_of_jobs(api, body):
    assert api.post("/ojs/v1/jobs/batch", body).status_code == 400


# --- INFO ----------------------------------------------------------------------------


def test_info_returns_the_job_with_its_error_history(api, claim):
    job = claim("w1", options={"retry": {"max_attempts": 3}})
    Job.objects.fail(job.id, Failure(type="Smtp", code="handler_error", message="refused"))
    body = api.get(f"/ojs/v1/jobs/{job.id}").json()["job"]
    assert (body["id"], body["state"], body["attempt"]) == (str(job.id), "retryable", 1)
    assert body["error"]["message"] == "refused"
    [entry] = body["errors"]
    assert (entry["attempt"], entry["type"], entry["code"], entry["message"]) == (1, "Smtp", "handler_error", "refused")
    assert entry["occurred_at"] == entry["timestamp"]
    assert body["next_attempt_at"] == body["next_retry_at"]


def test_info_of_a_job_without_errors_has_an_empty_history(api, push):
    assert api.get(f"/ojs/v1/jobs/{push().id}").json()["job"]["errors"] == []


def test_info_with_a_malformed_id_is_400(api):
    response = api.get("/ojs/v1/jobs/not-a-uuid")
    assert (response.status_code, error_of(response)["details"]["field"]) == (400, "id")


# --- CANCEL --------------------------------------------------------------------------


@pytest.mark.parametrize("options", [{}, {"pending": True}, {"delay_until": "2999-01-01T00:00:00Z"}])
def test_cancel_answers_the_cancelled_job_and_the_state_it_left(api, push, options):
    job = push(options=options)
    response = api.delete(f"/ojs/v1/jobs/{job.id}")
    assert response.status_code == 200
    body = response.json()["job"]
    assert (body["state"], body["previous_state"]) == ("cancelled", job.state)
    assert body["cancelled_at"].endswith("Z")


def test_cancel_of_an_active_job_makes_its_ack_a_409(api, claim):
    job = claim("w1")
    assert api.delete(f"/ojs/v1/jobs/{job.id}").json()["job"]["previous_state"] == "active"
    response = api.post("/ojs/v1/workers/ack", {"job_id": str(job.id), "worker_id": "w1"})
    assert response.status_code == 409
    assert error_of(response)["details"]["current_state"] == "cancelled"


def test_cancel_of_a_finished_job_is_200_and_changes_nothing(api, claim):
    # ojs-core §7.6 rule 4 (idempotent), the team's choice over the binding's 409.
    job = claim()
    Job.objects.ack(job.id, result="done")
    response = api.delete(f"/ojs/v1/jobs/{job.id}")
    assert response.status_code == 200
    body = response.json()["job"]
    assert (body["state"], body["result"]) == ("completed", "done")
    assert "previous_state" not in body


# --- ACTIVATE ------------------------------------------------------------------------


def test_activate_makes_a_pending_job_available(api, push):
    job = push(options={"pending": True})
    response = api.post(f"/ojs/v1/jobs/{job.id}/activate")
    assert response.status_code == 200
    body = response.json()["job"]
    assert (body["state"], body["previous_state"]) == ("available", "pending")
    assert body["activated_at"] == body["enqueued_at"]


def test_activate_of_a_job_that_is_not_pending_is_409_with_its_state(api, push):
    job = push()
    response = api.post(f"/ojs/v1/jobs/{job.id}/activate")
    assert response.status_code == 409
    error = error_of(response)
    assert (error["code"], error["details"]["current_state"]) == ("conflict", "available")
