"""FETCH, ACK, NACK, heartbeat, register and deregister over HTTP (ojs-http-binding §10)."""

from __future__ import annotations

import pytest

from django_ojs.models import Event, Job, Worker
from django_ojs.protocol.states import WorkerState
from tests.helpers import ago, reload, update

UNKNOWN = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


def error_of(response):
    return response.json()["error"]


# --- FETCH ------------------------------------------------------------------------------


def test_fetch_claims_a_job_for_the_worker(api, push):
    job = push(args=["x"], options={"queue": "email"})
    response = api.post("/ojs/v1/workers/fetch", {"queues": ["email"], "worker_id": "w1"})
    assert response.status_code == 200
    body = response.json()
    [fetched] = body["jobs"]
    assert body["job"] == fetched
    assert (fetched["id"], fetched["state"], fetched["attempt"], fetched["worker_id"]) == (
        str(job.id), "active", 1, "w1")
    assert fetched["started_at"] and fetched["visibility_deadline"]


def test_fetch_of_an_empty_queue_is_200_with_no_jobs(api):
    response = api.post("/ojs/v1/workers/fetch", {"queues": ["default"]})
    assert (response.status_code, response.json()) == (200, {"jobs": []})


def test_fetch_honours_count_queue_order_and_a_single_queue_name(api, push):
    for queue in ("b", "a", "a"):
        push(options={"queue": queue})
    body = api.post("/ojs/v1/workers/fetch", {"queues": ["a", "b"], "count": 5}).json()
    assert [job["queue"] for job in body["jobs"]] == ["a", "a", "b"]
    push(options={"queue": "solo"})
    assert len(api.post("/ojs/v1/workers/fetch", {"queues": "solo"}).json()["jobs"]) == 1


def test_fetch_honours_the_visibility_timeout_asked_for(api, push):
    job = push()
    api.post("/ojs/v1/workers/fetch", {"queues": ["default"], "visibility_timeout_ms": 4000})
    stored = reload(job)
    assert (stored.lease_expires_at - stored.started_at).total_seconds() == 4


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "queues"),
        ({"queues": []}, "queues"),
        ({"queues": {"a": 1}}, "queues"),
        ({"queues": ["Bad Queue"]}, "queues[0]"),
        ({"queues": ["ok", 5]}, "queues[1]"),
        ({"queues": ["ok"], "count": 0}, "count"),
        ({"queues": ["ok"], "count": 1001}, "count"),
        ({"queues": ["ok"], "count": "5"}, "count"),
        ({"queues": ["ok"], "count": True}, "count"),
        ({"queues": ["ok"], "visibility_timeout_ms": 0}, "visibility_timeout_ms"),
        ({"queues": ["ok"], "visibility_timeout_ms": 1.5}, "visibility_timeout_ms"),
        ({"queues": ["ok"], "visibility_timeout_ms": 10**15}, "visibility_timeout_ms"),
        ({"queues": ["ok"], "worker_id": ""}, "worker_id"),
        ({"queues": ["ok"], "worker_id": 7}, "worker_id"),
        ({"queues": ["ok"], "worker_id": "w" * 256}, "worker_id"),
    ],
)
def test_fetch_validates_its_fields_and_claims_nothing(api, push, body, field):
    job = push(options={"queue": "ok"})
    response = api.post("/ojs/v1/workers/fetch", body)
    assert response.status_code == 400
    assert error_of(response)["details"]["field"] == field
    assert reload(job).state == "available"


# --- ACK -------------------------------------------------------------------------------------


def test_ack_completes_the_job(api, claim):
    job = claim("w1")
    response = api.post("/ojs/v1/workers/ack", {"job_id": str(job.id), "worker_id": "w1", "result": {"n": 1}})
    assert response.status_code == 200
    body = response.json()
    assert (body["acknowledged"], body["id"], body["job_id"], body["state"]) == (
        True, str(job.id), str(job.id), "completed")
    assert body["completed_at"] == body["job"]["completed_at"]
    assert body["job"]["result"] == {"n": 1}


def test_ack_accepts_id_as_an_alias_of_job_id(api, claim):
    job = claim()
    assert api.post("/ojs/v1/workers/ack", {"id": str(job.id)}).status_code == 200


@pytest.mark.parametrize("state", ["available", "completed"])
def test_ack_of_a_job_that_is_not_active_is_409_with_its_state(api, push, claim, state):
    job = push() if state == "available" else claim()
    if state == "completed":
        Job.objects.ack(job.id)
    response = api.post("/ojs/v1/workers/ack", {"job_id": str(job.id)})
    assert response.status_code == 409
    error = error_of(response)
    assert (error["code"], error["retryable"], error["details"]["current_state"]) == ("conflict", False, state)


def test_ack_by_a_worker_that_does_not_hold_the_lease_is_409(api, claim):
    job = claim("owner")
    response = api.post("/ojs/v1/workers/ack", {"job_id": str(job.id), "worker_id": "intruder"})
    assert response.status_code == 409
    assert error_of(response)["details"]["current_state"] == "active"
    assert reload(job).state == "active"


def test_ack_for_an_older_attempt_is_409(api, claim):
    job = update(claim("w1"), lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    Job.objects.fetch([job.queue], worker_id="w1")
    response = api.post("/ojs/v1/workers/ack", {"job_id": str(job.id), "worker_id": "w1", "attempt": 1})
    assert response.status_code == 409
    assert api.post("/ojs/v1/workers/ack", {"job_id": str(job.id), "worker_id": "w1", "attempt": 2}).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "job_id"), ({"job_id": "nope"}, "job_id"), ({"job_id": 5}, "job_id"),
     ({"job_id": UNKNOWN, "worker_id": 5}, "worker_id"), ({"job_id": UNKNOWN, "attempt": 0}, "attempt"),
     ({"job_id": UNKNOWN, "attempt": "1"}, "attempt")],
)
def test_ack_validates_its_fields(api, body, field):
    response = api.post("/ojs/v1/workers/ack", body)
    assert (response.status_code, error_of(response)["details"]["field"]) == (400, field)


# --- batch ACK (this server's extension) ----------------------------------------------------


def ack_batch(api, *acks):
    return api.post("/ojs/v1/workers/ack/batch", {"acks": list(acks)})


def test_batch_ack_completes_each_job_with_its_result_and_event(api, claim):
    first, second = claim("w1"), claim("w1")
    response = ack_batch(api, {"job_id": str(first.id), "worker_id": "w1", "attempt": 1, "result": {"n": 1}},
                         {"job_id": str(second.id), "worker_id": "w1", "attempt": 1})
    assert response.status_code == 200
    assert response.json() == {
        "results": [{"job_id": str(first.id), "acknowledged": True, "state": "completed"},
                    {"job_id": str(second.id), "acknowledged": True, "state": "completed"}],
        "acknowledged": 2,
        "refused": 0,
    }
    assert (reload(first).state, reload(first).result, reload(second).state, reload(second).result) == (
        "completed", {"n": 1}, "completed", None)
    for job in (first, second):
        assert Event.objects.filter(job_id=job.id, type="job.completed").count() == 1


def test_a_stale_ack_in_a_batch_is_refused_alone_with_the_error_a_single_ack_gets(api, claim, push):
    held, stolen, waiting = claim("w1"), claim("owner"), push()
    acks = [{"job_id": str(held.id), "worker_id": "w1"}, {"job_id": str(stolen.id), "worker_id": "w1"},
            {"job_id": str(waiting.id)}, {"job_id": UNKNOWN}, {"job_id": str(held.id), "worker_id": "w1"}]
    singles = {}
    for index, ack in enumerate(acks[1:4], start=1):
        single = api.post("/ojs/v1/workers/ack", ack)
        singles[index] = (single.status_code, error_of(single))
    body = ack_batch(api, *acks).json()
    assert (body["acknowledged"], body["refused"]) == (1, 4)
    assert [entry["acknowledged"] for entry in body["results"]] == [True, False, False, False, False]
    for index, (status, error) in singles.items():
        entry = body["results"][index]
        assert entry["status"] == status
        assert {name: entry["error"][name] for name in ("code", "message", "retryable", "details")} == {
            name: error[name] for name in ("code", "message", "retryable", "details")}
    # The same job named twice is completed once; the second is refused as a second ACK would be.
    assert (body["results"][4]["status"], body["results"][4]["error"]["details"]["current_state"]) == (
        409, "completed")
    assert (reload(held).state, reload(stolen).state, reload(waiting).state) == ("completed", "active", "available")


def test_batch_ack_moves_a_workflow_on_as_a_single_ack_does(api):
    created = api.post("/ojs/v1/workflows", {"type": "chain", "steps": [
        {"type": "step.one", "args": [], "options": {"queue": "wf-batch"}},
        {"type": "step.two", "args": [], "options": {"queue": "wf-batch"}}]})
    assert created.status_code == 201, created.json()
    [first] = api.post("/ojs/v1/workers/fetch", {"queues": ["wf-batch"]}).json()["jobs"]
    assert ack_batch(api, {"job_id": first["id"]}).json()["acknowledged"] == 1
    [second] = api.post("/ojs/v1/workers/fetch", {"queues": ["wf-batch"]}).json()["jobs"]
    assert second["type"] == "step.two"


def test_batch_ack_beyond_its_bound_is_400_and_changes_nothing(api, claim, settings):
    settings.OJS = {**settings.OJS, "MAX_FETCH_COUNT": 2}
    jobs = [claim() for _ in range(3)]
    response = ack_batch(api, *({"job_id": str(job.id)} for job in jobs))
    assert response.status_code == 400
    assert error_of(response)["details"] == {"field": "acks", "max_acks": 2, "count": 3}
    assert {reload(job).state for job in jobs} == {"active"}


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "acks"), ({"acks": []}, "acks"), ({"acks": {"job_id": UNKNOWN}}, "acks"), ({"acks": [5]}, "acks[0]"),
     ({"acks": [{"job_id": UNKNOWN}, {}]}, "acks[1].job_id"),
     ({"acks": [{"job_id": UNKNOWN}, {"job_id": "nope"}]}, "acks[1].job_id"),
     ({"acks": [{"job_id": UNKNOWN, "attempt": 0}]}, "acks[0].attempt"),
     ({"acks": [{"job_id": UNKNOWN, "worker_id": 5}]}, "acks[0].worker_id"),
     ({"acks": [{"job_id": UNKNOWN, "result": "a\u0000b"}]}, "acks[0].result")],
)
def test_batch_ack_validates_each_ack_and_refuses_the_whole_request(api, claim, body, field):
    job = claim()
    if body.get("acks") and isinstance(body["acks"], list):
        body = {"acks": [{"job_id": str(job.id)}, *body["acks"]]}
        field = field.replace("acks[1]", "acks[2]").replace("acks[0]", "acks[1]")
    response = api.post("/ojs/v1/workers/ack/batch", body)
    assert (response.status_code, error_of(response)["details"]["field"]) == (400, field), error_of(response)
    assert reload(job).state == "active"


# --- a batch ACK that carries the next FETCH ------------------------------------------------


def test_a_batch_ack_carrying_a_fetch_completes_its_jobs_then_claims_in_the_same_request(api, claim, push):
    held = [claim("w1"), claim("w1")]
    waiting = [push(options={"queue": "turns"}) for _ in range(3)]
    response = api.post("/ojs/v1/workers/ack/batch", {
        "acks": [{"job_id": str(job.id), "worker_id": "w1", "attempt": 1, "result": n} for n, job in enumerate(held)],
        "fetch": {"queues": ["turns"], "count": 2, "worker_id": "w1"}})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["acknowledged"], body["refused"]) == (2, 0)
    assert [job["id"] for job in body["jobs"]] == [str(job.id) for job in waiting[:2]]
    assert {(job["state"], job["worker_id"], job["attempt"]) for job in body["jobs"]} == {("active", "w1", 1)}
    assert [(reload(job).state, reload(job).result) for job in held] == [("completed", 0), ("completed", 1)]
    assert [reload(job).state for job in waiting] == ["active", "active", "available"]
    for job in held:
        assert Event.objects.filter(job_id=job.id, type="job.completed").count() == 1
    for job in waiting[:2]:
        assert Event.objects.filter(job_id=job.id, type="job.started").count() == 1


def test_a_carried_fetch_claims_what_the_acks_leave_and_a_refused_ack_does_not_stop_it(api, claim, push):
    held, stolen = claim("w1"), claim("owner")
    waiting = push(options={"queue": "turns"})
    body = api.post("/ojs/v1/workers/ack/batch", {
        "acks": [{"job_id": str(held.id)}, {"job_id": str(stolen.id), "worker_id": "w1"}],
        "fetch": {"queues": ["turns"], "count": 5}}).json()
    assert (body["acknowledged"], body["refused"]) == (1, 1)
    single = api.post("/ojs/v1/workers/ack", {"job_id": str(stolen.id), "worker_id": "w1"})
    entry, error = body["results"][1], error_of(single)
    assert entry["status"] == single.status_code
    assert entry["error"] == {name: error[name] for name in ("code", "message", "retryable", "details")}
    assert [job["id"] for job in body["jobs"]] == [str(waiting.id)]
    assert (reload(held).state, reload(stolen).state, reload(waiting).state) == ("completed", "active", "active")


def test_a_carried_fetch_may_come_with_no_acks_and_answers_as_fetch(api, push):
    job = push(options={"queue": "turns"})
    response = api.post("/ojs/v1/workers/ack/batch", {
        "acks": [], "fetch": {"queues": ["turns"], "worker_id": "w9", "visibility_timeout_ms": 4000}})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["results"], body["acknowledged"], body["refused"]) == ([], 0, 0)
    [fetched] = body["jobs"]
    stored = reload(job)
    assert (fetched["id"], stored.state, stored.worker_id) == (str(job.id), "active", "w9")
    assert (stored.lease_expires_at - stored.started_at).total_seconds() == 4


def test_a_carried_fetch_of_an_empty_queue_completes_the_acks_and_claims_nothing(api, claim):
    held = claim("w1")
    body = api.post("/ojs/v1/workers/ack/batch", {
        "acks": [{"job_id": str(held.id), "worker_id": "w1", "attempt": 1}],
        "fetch": {"queues": ["nothing-here"], "worker_id": "w1"}}).json()
    assert (body["acknowledged"], body["jobs"], reload(held).state) == (1, [], "completed")


def test_a_carried_fetch_claims_the_job_its_acks_released_from_a_workflow(api):
    created = api.post("/ojs/v1/workflows", {"type": "chain", "steps": [
        {"type": "step.one", "args": [], "options": {"queue": "wf-turn"}},
        {"type": "step.two", "args": [], "options": {"queue": "wf-turn"}}]})
    assert created.status_code == 201, created.json()
    [first] = api.post("/ojs/v1/workers/fetch", {"queues": ["wf-turn"], "worker_id": "w1"}).json()["jobs"]
    body = api.post("/ojs/v1/workers/ack/batch", {
        "acks": [{"job_id": first["id"], "worker_id": "w1", "attempt": 1}],
        "fetch": {"queues": ["wf-turn"], "worker_id": "w1"}}).json()
    assert body["acknowledged"] == 1
    assert [job["type"] for job in body["jobs"]] == ["step.two"]


def test_a_carried_fetch_claims_nothing_in_maintenance_mode_but_the_acks_complete(api, claim, push):
    from django_ojs.core import maintenance_mode

    held, waiting = claim("w1"), push(options={"queue": "turns"})
    maintenance_mode.enter("test")
    try:
        body = api.post("/ojs/v1/workers/ack/batch", {
            "acks": [{"job_id": str(held.id), "worker_id": "w1", "attempt": 1}],
            "fetch": {"queues": ["turns"], "worker_id": "w1"}}).json()
    finally:
        maintenance_mode.leave()
    assert (body["acknowledged"], body["jobs"]) == (1, [])
    assert (reload(held).state, reload(waiting).state) == ("completed", "available")


@pytest.mark.parametrize(
    ("body", "field"),
    [({"acks": [], "fetch": None}, "fetch"), ({"acks": [], "fetch": ["turns"]}, "fetch"),
     ({"acks": [], "fetch": {}}, "fetch.queues"), ({"acks": [], "fetch": {"queues": ["Bad Queue"]}}, "fetch.queues[0]"),
     ({"acks": [], "fetch": {"queues": ["turns"], "count": 0}}, "fetch.count"),
     ({"acks": [], "fetch": {"queues": ["turns"], "worker_id": 5}}, "fetch.worker_id"),
     ({"acks": [], "fetch": {"queues": ["turns"], "visibility_timeout_ms": -1}}, "fetch.visibility_timeout_ms"),
     ({"acks": []}, "acks")],
)
def test_a_malformed_carried_fetch_refuses_the_whole_request_and_changes_nothing(api, claim, push, body, field):
    held, waiting = claim("w1"), push(options={"queue": "turns"})
    body = {**body, "acks": [{"job_id": str(held.id), "worker_id": "w1"}] if "fetch" in body else []}
    response = api.post("/ojs/v1/workers/ack/batch", body)
    assert (response.status_code, error_of(response)["details"]["field"]) == (400, field), error_of(response)
    assert (reload(held).state, reload(waiting).state) == ("active", "available")


def test_a_carried_fetch_beyond_max_fetch_count_is_400(api, claim, settings):
    settings.OJS = {**settings.OJS, "MAX_FETCH_COUNT": 2}
    held = claim("w1")
    response = api.post("/ojs/v1/workers/ack/batch", {
        "acks": [{"job_id": str(held.id)}], "fetch": {"queues": ["turns"], "count": 3}})
    assert (response.status_code, error_of(response)["details"]["field"]) == (400, "fetch.count")
    assert reload(held).state == "active"


# --- NACK ---------------------------------------------------------------------------------


def nack(api, job, **body):
    return api.post("/ojs/v1/workers/nack", {"job_id": str(job.id), **body})


def test_nack_with_attempts_left_answers_when_the_job_will_retry(api, claim):
    job = claim("w1", options={"retry": {"max_attempts": 3, "jitter": False, "initial_interval": "PT2S"}})
    response = nack(api, job, worker_id="w1", error={"code": "handler_error", "message": "boom", "retryable": True})
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["attempt"], body["max_attempts"], body["retry_delay_ms"]) == (
        "retryable", 1, 3, 2000)
    assert body["next_attempt_at"] == body["next_retry_at"] == body["job"]["next_attempt_at"]
    assert body["job"]["error"]["code"] == "handler_error"


def test_nack_on_the_last_attempt_answers_discarded(api, claim):
    job = claim(options={"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}})
    body = nack(api, job, error={"code": "handler_error", "message": "boom"}).json()
    assert (body["state"], body["dead_letter"]) == ("discarded", True)
    assert body["discarded_at"] and body["completed_at"]
    assert "retry_delay_ms" not in body


def test_nack_with_requeue_releases_the_job_at_once(api, claim):
    job = claim("w1", options={"retry": {"max_attempts": 1}})
    body = nack(api, job, requeue=True, error={"code": "cancelled", "message": "shutdown", "retryable": False}).json()
    assert (body["state"], body["attempt"]) == ("available", 1)
    assert reload(job).releases == 1


def test_nack_keeps_the_error_history(api, claim):
    job = claim(options={"retry": {"max_attempts": 3}})
    nack(api, job, error={"code": "handler_error", "message": "first", "details": {"host": "smtp"}})
    [entry] = api.get(f"/ojs/v1/jobs/{job.id}").json()["job"]["errors"]
    assert (entry["attempt"], entry["code"], entry["message"], entry["details"]) == (
        1, "handler_error", "first", {"host": "smtp"})


def test_nack_of_a_job_that_is_not_active_is_409(api, push):
    job = push()
    response = nack(api, job, error={"code": "x", "message": ""})
    assert (response.status_code, error_of(response)["details"]["current_state"]) == (409, "available")


def test_nack_by_a_worker_that_does_not_hold_the_lease_is_409(api, claim):
    job = claim("owner")
    assert nack(api, job, worker_id="intruder", error={"code": "x", "message": ""}).status_code == 409
    assert reload(job).state == "active"


@pytest.mark.parametrize(
    ("body", "field"),
    [({"error": "boom"}, "error"), ({}, "error"), ({"error": None}, "error"), ({"error": {"message": 5}}, "error.message"),
     ({"error": {"retryable": "no"}}, "error.retryable"), ({"requeue": "yes"}, "requeue"),
     ({"error": {"backtrace": [1]}}, "error.backtrace")],
)
def test_nack_validates_its_fields_and_changes_nothing(api, claim, body, field):
    job = claim()
    response = nack(api, job, **body)
    assert (response.status_code, error_of(response)["details"]["field"]) == (400, field)
    assert reload(job).state == "active"


# --- heartbeat ---------------------------------------------------------------------------


def test_a_heartbeat_answers_running_and_extends_the_listed_jobs(api, claim):
    job = update(claim("w1"), lease_expires_at=ago(seconds=1))
    response = api.post("/ojs/v1/workers/heartbeat", {"worker_id": "w1", "active_jobs": [str(job.id)]})
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["directive"], body["jobs_extended"]) == ("running", "", [str(job.id)])
    assert (body["jobs_cancelled"], body["jobs_lost"]) == ([], [])
    assert body["server_time"].endswith("Z")
    assert (body["heartbeat_interval"], body["heartbeat_timeout"]) == (5, 30)
    assert reload(job).lease_expires_at > reload(job).started_at


@pytest.mark.parametrize(
    "body",
    [
        {"state": "running", "active_jobs": 1, "active_job_ids": ["{id}"]},
        {"active_job_ids": ["{id}"]},
        {"job_id": "{id}"},
    ],
)
def test_a_heartbeat_accepts_the_worker_protocols_shape_too(api, claim, body):
    job = claim("w1")
    body = {k: ([str(job.id)] if isinstance(v, list) else str(job.id) if v == "{id}" else v) for k, v in body.items()}
    reply = api.post("/ojs/v1/workers/heartbeat", {"worker_id": "w1", **body}).json()
    assert reply["jobs_extended"] == [str(job.id)]


def test_a_heartbeat_may_name_the_attempt_it_holds(api, claim):
    job = claim("w1")
    beat = {"worker_id": "w1", "active_jobs": [{"job_id": str(job.id), "attempt": 1}, {"id": str(job.id), "attempt": 2}]}
    reply = api.post("/ojs/v1/workers/heartbeat", beat).json()
    assert (reply["jobs_extended"], reply["jobs_lost"]) == ([str(job.id)], [str(job.id)])


def test_a_fetch_names_at_most_a_thousand_queues(api):
    response = api.post("/ojs/v1/workers/fetch", {"queues": [f"q{n}" for n in range(1001)]})
    assert (response.status_code, error_of(response)["details"]["field"]) == (400, "queues")


@pytest.mark.parametrize("directive", ["quiet", "terminate"])
def test_a_heartbeat_answers_the_operators_directive(api, directive):
    Worker.objects.register("w1")
    Worker.objects.set_directive(["w1"], WorkerState(directive))
    body = api.post("/ojs/v1/workers/heartbeat", {"worker_id": "w1"}).json()
    assert (body["state"], body["directive"]) == (directive, directive)


def test_the_test_directive_hook_only_works_with_test_hooks_on(api, push, ojs):
    job = push(options={"metadata": {"test_directive": "quiet"}})
    api.post("/ojs/v1/workers/fetch", {"queues": ["default"], "worker_id": "w1"})
    beat = {"worker_id": "w1", "active_jobs": [str(job.id)]}
    assert api.post("/ojs/v1/workers/heartbeat", beat).json()["state"] == "running"
    ojs(TEST_HOOKS=True)
    assert api.post("/ojs/v1/workers/heartbeat", beat).json()["state"] == "quiet"


def test_a_heartbeat_registers_an_unknown_worker_with_what_it_says(api):
    api.post("/ojs/v1/workers/heartbeat", {"worker_id": "w-new", "hostname": "h1", "pid": 12, "queues": ["q"],
                                           "concurrency": 4, "labels": ["canary"],
                                           "started_at": "2026-01-01T00:00:00Z"})
    worker = Worker.objects.get(id="w-new")
    assert (worker.hostname, worker.pid, worker.queues, worker.concurrency, worker.labels) == (
        "h1", 12, ["q"], 4, ["canary"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "worker_id"),
        ({"worker_id": ""}, "worker_id"),
        ({"worker_id": "w", "state": "sleeping"}, "state"),
        ({"worker_id": "w", "active_jobs": "abc"}, "active_jobs"),
        ({"worker_id": "w", "active_jobs": -1}, "active_jobs"),
        ({"worker_id": "w", "active_jobs": ["not-a-uuid"]}, "active_jobs[0]"),
        ({"worker_id": "w", "active_jobs": [{"attempt": 1}]}, "active_jobs[0].job_id"),
        ({"worker_id": "w", "active_jobs": [{"job_id": "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "attempt": 0}]},
         "active_jobs[0].attempt"),
        ({"worker_id": "w", "active_job_ids": 3}, "active_job_ids"),
        ({"worker_id": "w", "visibility_timeout_ms": -1}, "visibility_timeout_ms"),
        ({"worker_id": "w", "pid": -1}, "pid"),
        ({"worker_id": "w", "concurrency": 0}, "concurrency"),
        ({"worker_id": "w", "queues": ["Bad"]}, "queues[0]"),
        ({"worker_id": "w", "labels": [1]}, "labels"),
        ({"worker_id": "w", "started_at": "2026-01-01T00:00:00"}, "started_at"),
        ({"worker_id": "w", "hostname": ["h"]}, "hostname"),
    ],
)
def test_a_heartbeat_validates_its_fields_and_records_nothing(api, body, field):
    response = api.post("/ojs/v1/workers/heartbeat", body)
    assert (response.status_code, error_of(response)["details"]["field"]) == (400, field)
    assert not Worker.objects.exists()


# --- register / deregister -------------------------------------------------------------


def test_register_answers_the_server_settings(api):
    response = api.post("/ojs/v1/workers/register", {"worker_id": "w1", "hostname": "h", "pid": 1,
                                                     "queues": ["default"], "concurrency": 10})
    assert response.status_code == 200
    body = response.json()
    assert (body["ok"], body["worker_id"], body["heartbeat_interval"], body["heartbeat_timeout"],
            body["visibility_timeout_default"]) == (True, "w1", 5, 30, 1800)
    assert Worker.objects.get(id="w1").hostname == "h"


def test_deregister_recovers_the_workers_jobs(api, claim):
    api.post("/ojs/v1/workers/register", {"worker_id": "w1"})
    job = claim("w1")
    body = api.post("/ojs/v1/workers/deregister", {"worker_id": "w1"}).json()
    assert (body["ok"], body["deregistered"]) == (True, True)
    assert reload(job).state == "available"
    assert not Worker.objects.exists()
    assert api.post("/ojs/v1/workers/deregister", {"worker_id": "w1"}).json()["deregistered"] is False


@pytest.mark.parametrize("action", ["register", "deregister"])
@pytest.mark.parametrize("worker_id", [None, "", 7, "w" * 256])
def test_register_and_deregister_need_a_worker_id(api, action, worker_id):
    body = {"hostname": "h"} if worker_id is None else {"worker_id": worker_id}
    response = api.post(f"/ojs/v1/workers/{action}", body)
    assert (response.status_code, error_of(response)["details"]["field"]) == (400, "worker_id")
    assert not Worker.objects.exists()


def test_a_full_worker_round_trip_over_http(api):
    """FETCH without worker_id, then ACK without it: what the official SDKs send."""
    job_id = api.post("/ojs/v1/jobs", {"type": "a", "args": []}).json()["job"]["id"]
    assert api.post("/ojs/v1/workers/fetch", {"queues": ["default"]}).json()["jobs"][0]["id"] == job_id
    assert api.post("/ojs/v1/workers/ack", {"job_id": job_id}).json()["state"] == "completed"
    assert api.get(f"/ojs/v1/jobs/{job_id}").json()["job"]["state"] == "completed"
