"""Durable jobs on the wire: a checkpoint in the progress report, PUT /jobs/{id}/steps/{name}, and what
FETCH and INFO carry for a retry."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from django_ojs.core.types import Lease
from django_ojs.models import Job, JobStep
from django_ojs.protocol.durable import MAX_CHECKPOINT_BYTES, MAX_STEP_RESULT_BYTES
from django_ojs.protocol.failure import Failure
from tests.conftest import MEDIA_TYPE, check_binding_response
from tests.helpers import ago, reload, update

pytestmark = pytest.mark.django_db


def progress(job) -> str:
    return f"/ojs/v1/jobs/{job.id}/progress"


def step(job, name: str) -> str:
    return f"/ojs/v1/jobs/{job.id}/steps/{name}"


RETRIES = {"retry": {"max_attempts": 3, "initial_interval": "PT1S"}}


def fail_and_refetch(worker, job):
    Job.objects.fail(job.id, Failure(type="Boom", message="x"), lease=Lease(worker_id="w1", attempt=job.attempt))
    update(job, run_at=ago(seconds=1))
    Job.objects.promote_due(10)
    reply = worker.post("/ojs/v1/workers/fetch", {"queues": [job.queue], "worker_id": "w2"})
    assert reply.status_code == 200, reply.content
    return reply.json()["jobs"][0]


def test_a_retry_fetches_the_last_checkpoint_and_the_recorded_steps(make_client, claim):
    worker = make_client("worker")
    job = claim("w1", options=RETRIES)
    body = {"progress": 0.73, "checkpoint": {"last_file_index": 72}, "attempt": 1, "worker_id": "w1"}
    assert worker.put(progress(job), body).json()["accepted"] is True
    reply = worker.put(step(job, "download"), {"attempt": 1, "worker_id": "w1", "result": {"files": 72}})
    assert reply.status_code == 200, reply.content
    assert reply.json()["recorded"] is True and reply.json()["step"]["name"] == "download"
    fetched = fail_and_refetch(worker, job)
    assert fetched["attempt"] == 2
    assert fetched["last_checkpoint"] == {"last_file_index": 72}
    assert fetched["last_checkpoint_attempt"] == 1
    assert [(s["name"], s["attempt"], s["result"]) for s in fetched["steps"]] == [("download", 1, {"files": 72})]
    # Progress starts afresh with the attempt (ojs-progress §5.3).
    assert worker.get(progress(job)).json()["progress"] is None
    info = worker.get(f"/ojs/v1/jobs/{job.id}").json()["job"]
    assert info["last_checkpoint"] == {"last_file_index": 72} and info["steps"][0]["recorded_at"]


def test_a_job_with_neither_shows_neither(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    info = worker.get(f"/ojs/v1/jobs/{job.id}").json()["job"]
    assert "last_checkpoint" not in info and "steps" not in info


def test_a_stale_checkpoint_is_not_accepted_and_changes_nothing(make_client, claim):
    worker = make_client("worker")
    job = claim("w1", options=RETRIES)
    stale = worker.put(progress(job), {"checkpoint": {"at": 1}, "attempt": 2, "worker_id": "w1"})
    assert (stale.status_code, stale.json()["accepted"]) == (200, False)
    other = worker.put(progress(job), {"checkpoint": {"at": 1}, "attempt": 1, "worker_id": "w9"})
    assert other.json()["accepted"] is False
    assert reload(job).checkpoint is None


def test_a_checkpoint_naming_no_attempt_lands_on_the_attempt_holding_the_job(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    assert worker.put(progress(job), {"checkpoint": {"at": 3}}).json()["accepted"] is True
    assert reload(job).checkpoint["attempt"] == 1


def test_a_stale_step_is_a_conflict_and_records_nothing(make_client, claim):
    worker = make_client("worker")
    job = claim("w1", options=RETRIES)
    reply = worker.put(step(job, "charge"), {"attempt": 2, "worker_id": "w1", "result": 1})
    assert reply.status_code == 409, reply.content
    error = reply.json()["error"]
    assert error["code"] == "conflict" and error["details"]["attempt"] == 1
    assert not JobStep.objects.exists()


def test_a_step_put_again_is_idempotent(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    first = worker.put(step(job, "charge"), {"attempt": 1, "result": {"id": "ch_1"}}).json()
    again = worker.put(step(job, "charge"), {"attempt": 1, "result": {"id": "ch_2"}}).json()
    assert (first["recorded"], again["recorded"]) == (True, False)
    assert again["step"]["result"] == {"id": "ch_1"} and JobStep.objects.count() == 1


@pytest.mark.parametrize("name", ["users/42", "a//b/", "/"])
def test_a_step_named_with_a_slash_is_recorded_under_that_name(make_client, claim, name):
    worker = make_client("worker")
    job = claim("w1")
    reply = worker.put(step(job, quote(name, safe="")), {"attempt": 1, "result": 1})
    assert reply.status_code == 200, reply.content
    assert reply.json()["step"]["name"] == name
    assert list(JobStep.objects.values_list("name", flat=True)) == [name]


@pytest.mark.parametrize(("body", "field"), [
    ({"checkpoint": [1], "attempt": 1}, "checkpoint"),
    ({"checkpoint": {"x": "y" * MAX_CHECKPOINT_BYTES}, "attempt": 1}, "checkpoint"),
    ({"checkpoint": {"x": 1}, "attempt": 0}, "attempt"),
])
def test_a_bad_checkpoint_is_a_400_and_changes_nothing(make_client, claim, body, field):
    worker = make_client("worker")
    job = claim("w1")
    reply = worker.put(progress(job), body)
    assert reply.status_code == 400, reply.content
    assert reply.json()["error"]["details"]["field"] == field
    assert reload(job).checkpoint is None and reload(job).progress is None


@pytest.mark.parametrize(("name", "body", "field"), [
    ("charge", {"result": 1}, "attempt"),
    ("charge", {"attempt": "1", "result": 1}, "attempt"),
    ("charge", {"attempt": 1, "result": "x" * MAX_STEP_RESULT_BYTES}, "result"),
    ("charge", {"attempt": 1, "worker_id": 5}, "worker_id"),
    ("%20", {"attempt": 1}, "name"),
    ("x" * 256, {"attempt": 1}, "name"),
])
def test_a_bad_step_is_a_400_and_records_nothing(make_client, claim, name, body, field):
    worker = make_client("worker")
    job = claim("w1")
    reply = worker.put(step(job, name), body)
    assert reply.status_code == 400, reply.content
    assert reply.json()["error"]["details"]["field"] == field
    assert not JobStep.objects.exists()


def test_a_step_body_that_is_not_an_object_is_a_400(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    response = worker.client.generic("PUT", step(job, "a"), b"[1]", content_type=MEDIA_TYPE)
    check_binding_response(response)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"]["field"] == "body"


def test_a_step_of_an_unknown_job_is_404_and_needs_the_worker_scope(make_client):
    missing = "/ojs/v1/jobs/019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f/steps/a"
    assert make_client("worker").put(missing, {"attempt": 1}).status_code == 404
    assert make_client("read").put(missing, {"attempt": 1}).status_code == 403
