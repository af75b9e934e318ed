"""Snooze, waits and signals on the wire (docs/reference/http/waits.md): a worker in any language parks
its job, a producer signals it; stale attempts and bad input are refused and change nothing."""

from __future__ import annotations

import pytest

from django_ojs.models import Job
from tests.conftest import check_binding_response
from tests.helpers import reload

pytestmark = pytest.mark.django_db

MISSING = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


def test_a_snooze_puts_the_job_back_for_later_and_info_counts_it(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    response = worker.post("/ojs/v1/workers/snooze", {"job_id": str(job.id), "attempt": 1, "worker_id": "w1",
                                                       "delay": 30})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["state"], body["snoozes"], body["job"]["attempt"]) == ("scheduled", 1, 1)
    assert body["run_at"] == body["job"]["run_at"]
    info = worker.get(f"/ojs/v1/jobs/{job.id}").json()["job"]
    assert (info["state"], info["snoozes"], "error" in info, info["errors"]) == ("scheduled", 1, False, [])


@pytest.mark.parametrize(("body", "field"), [
    ({"attempt": 1, "worker_id": "w1"}, "delay"),
    ({"attempt": 1, "worker_id": "w1", "delay": 0}, "delay"),
    ({"attempt": 1, "worker_id": "w1", "delay": "PT5S"}, "delay"),
    ({"worker_id": "w1", "delay": 5}, "attempt"),
    ({"attempt": True, "worker_id": "w1", "delay": 5}, "attempt"),
])
def test_a_bad_snooze_is_400_and_changes_nothing(make_client, claim, body, field):
    worker = make_client("worker")
    job = claim("w1")
    response = worker.post("/ojs/v1/workers/snooze", {"job_id": str(job.id), **body})
    assert response.status_code == 400, response.content
    check_binding_response(response)
    assert response.json()["error"]["code"] == "invalid_request"
    assert field in response.json()["error"]["message"]
    assert (reload(job).state, reload(job).snoozes) == ("active", 0)


def test_a_snooze_from_a_stale_attempt_is_409(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    response = worker.post("/ojs/v1/workers/snooze", {"job_id": str(job.id), "attempt": 2, "worker_id": "w1",
                                                       "delay": 5})
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "conflict" and error["details"] == {"job_id": str(job.id), "current_state": "active",
                                                                 "worker_id": "w1", "attempt": 1}
    # The refusal names the move refused, not another.
    assert "this snooze does not hold" in error["message"], error["message"]
    assert reload(job).state == "active"


def test_a_wait_parks_a_signal_wakes_and_the_next_wait_returns_its_payload(make_client, claim):
    worker, producer = make_client("worker"), make_client("enqueue")
    job = claim("w1")
    wait = {"job_id": str(job.id), "attempt": 1, "worker_id": "w1", "signal": "approved", "timeout": 3600}
    parked = worker.post("/ojs/v1/workers/wait", wait).json()
    assert (parked["parked"], parked["delivered"], parked["timed_out"], parked["state"]) == (
        True, False, False, "scheduled")
    info = worker.get(f"/ojs/v1/jobs/{job.id}").json()["job"]
    assert info["waiting"]["signal"] == "approved" and info["waiting"]["until"] == parked["until"]
    sent = producer.post(f"/ojs/v1/jobs/{job.id}/signal", {"name": "approved", "payload": {"by": "ann"}})
    assert sent.status_code == 200, sent.content
    assert (sent.json()["state"], "waiting" in sent.json()["job"]) == ("available", False)
    [claimed] = worker.post("/ojs/v1/workers/fetch", {"queues": [job.queue], "worker_id": "w1"}).json()["jobs"]
    assert claimed["signals"]["approved"]["payload"] == {"by": "ann"}
    again = worker.post("/ojs/v1/workers/wait", {**wait, "attempt": claimed["attempt"]}).json()
    assert (again["delivered"], again["payload"], again["state"]) == (True, {"by": "ann"}, "active")


def test_a_second_signal_of_a_name_is_409_and_the_first_is_kept(make_client, push):
    producer = make_client("enqueue")
    job = push()
    assert producer.post(f"/ojs/v1/jobs/{job.id}/signal", {"name": "go", "payload": 1}).status_code == 200
    response = producer.post(f"/ojs/v1/jobs/{job.id}/signal", {"name": "go", "payload": 2})
    assert response.status_code == 409
    check_binding_response(response)
    assert reload(job).signals["go"]["payload"] == 1


def test_a_signal_to_a_finished_job_is_409_and_to_no_job_404(make_client, claim):
    producer = make_client("enqueue")
    job = claim("w1")
    Job.objects.ack(job.id)
    response = producer.post(f"/ojs/v1/jobs/{job.id}/signal", {"name": "go"})
    assert (response.status_code, response.json()["error"]["code"]) == (409, "conflict")
    assert producer.post(f"/ojs/v1/jobs/{MISSING}/signal", {"name": "go"}).status_code == 404


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "a b"}, {"name": 5}, {"name": "x" * 200},
                                  {"name": "go", "payload": "x" * 70000}])
def test_a_bad_signal_is_400_and_changes_nothing(make_client, push, body):
    producer = make_client("enqueue")
    job = push()
    response = producer.post(f"/ojs/v1/jobs/{job.id}/signal", body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid_request"
    assert not reload(job).signals


def test_signalling_needs_the_enqueue_scope(make_client, push):
    job = push()
    assert make_client("read").post(f"/ojs/v1/jobs/{job.id}/signal", {"name": "go"}).status_code == 403


def test_a_workflow_signal_reaches_its_running_step_and_the_steps_not_yet_started(api):
    step = {"type": "a", "args": [], "options": {"queue": "wf"}}
    created = api.post("/ojs/v1/workflows", {"type": "chain", "steps": [step, {**step, "type": "b"}]}).json()
    workflow_id = created["workflow"]["id"]
    [first] = api.post("/ojs/v1/workers/fetch", {"queues": ["wf"], "worker_id": "w1"}).json()["jobs"]
    sent = api.post(f"/ojs/v1/workflows/{workflow_id}/signal", {"name": "go", "payload": "yes"})
    assert sent.status_code == 200, sent.content
    assert sent.json()["jobs_signalled"] == 1
    assert api.post(f"/ojs/v1/workflows/{workflow_id}/signal", {"name": "go"}).status_code == 409
    api.post("/ojs/v1/workers/ack", {"job_id": first["id"], "worker_id": "w1"})
    [second] = api.post("/ojs/v1/workers/fetch", {"queues": ["wf"], "worker_id": "w1"}).json()["jobs"]
    assert second["type"] == "b" and second["signals"]["go"]["payload"] == "yes"
    assert api.post(f"/ojs/v1/workflows/{MISSING}/signal", {"name": "go"}).status_code == 404


@pytest.mark.parametrize(("body", "status"), [
    ({"attempt": 2, "worker_id": "w1", "signal": "approved", "timeout": 60}, 409),
    ({"attempt": 1, "worker_id": "w2", "signal": "approved", "timeout": 60}, 409),
    ({"attempt": 1, "worker_id": "w1", "signal": "no spaces", "timeout": 60}, 400),
    ({"attempt": 1, "worker_id": "w1", "signal": "approved"}, 400),
    ({"attempt": 1, "worker_id": "w1", "timeout": 60}, 400),
    ({"attempt": 1, "worker_id": "w1", "signal": "approved", "timeout": -5}, 400),
])
def test_a_wait_from_another_lease_or_with_bad_input_is_refused_and_changes_nothing(make_client, claim, body, status):
    worker = make_client("worker")
    job = claim("w1")
    response = worker.post("/ojs/v1/workers/wait", {"job_id": str(job.id), **body})
    assert response.status_code == status, response.content
    check_binding_response(response)
    if status == 409:
        assert "this wait does not hold" in response.json()["error"]["message"], response.content
    stored = reload(job)
    assert (stored.state, stored.waiting_for, stored.waits) == ("active", None, None)


def test_a_signal_to_a_finished_workflow_is_409(api):
    step = {"type": "a", "args": [], "options": {"queue": "wf-done"}}
    workflow_id = api.post("/ojs/v1/workflows", {"type": "chain", "steps": [step]}).json()["workflow"]["id"]
    [job] = api.post("/ojs/v1/workers/fetch", {"queues": ["wf-done"], "worker_id": "w1"}).json()["jobs"]
    api.post("/ojs/v1/workers/ack", {"job_id": job["id"], "worker_id": "w1"})
    response = api.post(f"/ojs/v1/workflows/{workflow_id}/signal", {"name": "go"})
    assert (response.status_code, response.json()["error"]["code"]) == (409, "conflict")
