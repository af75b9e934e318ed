"""Workflows over HTTP (ojs-http-binding §14, ojs-workflows §11): create, read, cancel, refuse."""

from __future__ import annotations

import uuid

import pytest

from django_ojs.models import Event, Job, Workflow
from tests.conftest import MEDIA_TYPE, OJSClient


def step(kind: str, **options):
    return {"type": kind, "args": [kind], "options": {"queue": "wf", **options}}


def fetch(api, worker="w1"):
    return api.post("/ojs/v1/workers/fetch", {"queues": ["wf"], "worker_id": worker}).json()["jobs"]


def test_create_answers_201_with_location_counters_and_every_step(api):
    response = api.post("/ojs/v1/workflows", {"type": "chain", "name": "etl", "steps": [
        step("a"), {"type": "group", "name": "fan", "jobs": [step("b"), step("c")]}, step("d")]})
    assert response.status_code == 201
    workflow = response.json()["workflow"]
    assert response["Location"] == f"/ojs/v1/workflows/{workflow['id']}"
    assert uuid.UUID(workflow["id"]).version == 7
    assert (workflow["type"], workflow["name"], workflow["state"]) == ("chain", "etl", "running")
    assert (workflow["steps_total"], workflow["steps_completed"]) == (3, 0)
    assert workflow["metadata"]["job_count"] == 4
    first, fan, last = workflow["steps"]
    assert (first["index"], first["state"], first["type"]) == (0, "pending", "a") and first["job_id"]
    assert (fan["type"], fan["name"], fan["state"], [j["state"] for j in fan["jobs"]]) == (
        "group", "fan", "waiting", ["waiting", "waiting"])
    assert (last["state"], last["job_id"]) == ("waiting", None)


def test_get_shows_an_active_step_its_result_and_the_finished_workflow(api):
    created = api.post("/ojs/v1/workflows", {"type": "chain", "steps": [step("a"), step("b")]}).json()["workflow"]
    url = f"/ojs/v1/workflows/{created['id']}"
    [job] = fetch(api)
    assert job["parent_results"] == [] and job["workflow_id"] == created["id"]
    assert api.get(url).json()["workflow"]["steps"][0]["state"] == "active"
    api.post("/ojs/v1/workers/ack", {"job_id": job["id"], "worker_id": "w1", "result": {"n": 1}})
    [second] = fetch(api)
    assert second["parent_results"] == [{"n": 1}]
    api.post("/ojs/v1/workers/ack", {"job_id": second["id"], "worker_id": "w1", "result": 2})
    body = api.get(url).json()["workflow"]
    assert (body["state"], body["steps_completed"]) == ("completed", 2)
    assert [s["result"] for s in body["steps"]] == [{"n": 1}, 2]
    assert "completed_at" in body
    kinds = [e.type for e in Event.objects.filter(type__startswith="workflow.").order_by("seq")]
    assert kinds[:2] == ["workflow.created", "workflow.started"] and kinds[-1] == "workflow.completed"


def test_a_failed_workflow_reports_which_step_failed_and_why(api):
    created = api.post("/ojs/v1/workflows", {"type": "chain", "steps": [
        step("a", retry={"max_attempts": 1}), step("b")]}).json()["workflow"]
    [job] = fetch(api)
    api.post("/ojs/v1/workers/nack", {"job_id": job["id"], "worker_id": "w1",
                                      "error": {"code": "handler_error", "message": "nope"}})
    body = api.get(f"/ojs/v1/workflows/{created['id']}").json()["workflow"]
    assert body["state"] == "failed"
    assert body["error"]["failed_step_index"] == 0 and body["error"]["failed_job_ids"] == [job["id"]]
    assert body["error"]["errors"][0]["message"] == "nope"
    assert [s["state"] for s in body["steps"]] == ["failed", "cancelled"]


def test_the_bindings_dag_form_answers_with_step_ids_and_depends_on(api):
    response = api.post("/ojs/v1/workflows", {"name": "onboarding", "options": {"queue": "wf"}, "steps": [
        {"id": "welcome", "type": "email.send", "args": [], "depends_on": []},
        {"id": "profile", "type": "user.create_profile", "args": []},
        {"id": "confirm", "type": "email.send", "args": [], "depends_on": ["welcome", "profile"]},
    ]})
    assert response.status_code == 201
    steps = response.json()["workflow"]["steps"]
    assert [(s["id"], s["state"], s["depends_on"]) for s in steps] == [
        ("welcome", "pending", []), ("profile", "pending", []), ("confirm", "waiting", ["welcome", "profile"])]
    assert Job.objects.filter(queue="wf").count() == 2


def test_delete_cancels_then_conflicts(api):
    created = api.post("/ojs/v1/workflows", {"type": "group", "jobs": [step("a"), step("b")]}).json()["workflow"]
    url = f"/ojs/v1/workflows/{created['id']}"
    response = api.delete(url)
    body = response.json()["workflow"]
    assert response.status_code == 200
    assert (body["state"], body["steps_cancelled"], body["steps_already_completed"]) == ("cancelled", 2, 0)
    assert body["cancelled_at"]
    assert set(Job.objects.values_list("state", flat=True)) == {"cancelled"}
    again = api.delete(url)
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"


@pytest.mark.parametrize("path", ["/ojs/v1/workflows/not-a-uuid", f"/ojs/v1/workflows/{uuid.uuid4()}"])
def test_an_unknown_workflow_is_404_for_get_and_delete(api, path):
    for response in (api.get(path), api.delete(path)):
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"type": "chain"},
        {"type": "chain", "steps": "a"},
        {"type": "chain", "steps": [None]},
        {"type": "chain", "steps": [{"args": []}]},
        {"type": "group", "jobs": [{"type": "a", "args": [], "options": {"retry": {"max_attempts": -1}}}]},
        {"type": "batch", "jobs": [step("a")], "callbacks": {}},
        {"type": "batch", "jobs": [step("a")], "callbacks": {"on_success": "x"}},
        {"type": ["chain"], "steps": [step("a")]},
        {"type": "chain", "name": 7, "steps": [step("a")]},
        {"steps": [{"id": "a", "type": "a", "depends_on": "b"}]},
        {"steps": [{"id": "a", "type": "a"}, {"id": "a", "type": "b"}]},
        {"type": "chain", "steps": [{"type": "a", "args": [], "options": {"queue": "bad queue!"}}]},
    ],
)
def test_bad_definitions_are_4xx_and_store_nothing(api, body):
    response = api.post("/ojs/v1/workflows", body)
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["error"]["code"] in ("invalid_request", "validation_error")
    assert not Workflow.objects.exists() and not Job.objects.exists()


def test_a_body_that_is_not_an_object_is_refused(api):
    response = api.post_raw("/ojs/v1/workflows", "[1, 2]", content_type=MEDIA_TYPE)
    assert response.status_code == 400


def test_the_manifest_declares_workflows_and_level_4(api):
    body = api.get("/ojs/manifest").json()
    assert body["capabilities"]["workflows"] is True and body["conformance_level"] == 4


def test_creating_needs_the_enqueue_scope(make_client):
    reader = make_client("read")
    assert reader.post("/ojs/v1/workflows", {"type": "group", "jobs": [step("a")]}).status_code == 403


def test_a_name_too_long_to_store_is_refused(api):
    response = api.post("/ojs/v1/workflows", {"type": "group", "name": "n" * 256, "jobs": [step("a")]})
    assert response.status_code == 400 and not Workflow.objects.exists()


# -- progress (ojs-progress §9) ------------------------------------------------------


def test_a_chains_progress_is_its_completed_steps_plus_the_current_steps_share(api):
    created = api.post("/ojs/v1/workflows", {"type": "chain", "steps": [
        step("extract"), step("transform"), step("load")]}).json()["workflow"]
    url = f"/ojs/v1/workflows/{created['id']}/progress"
    assert (api.get(url).json()["progress"], api.get(url).json()["states"]) == (0.0, {"pending": 1, "waiting": 2})
    [first] = fetch(api)
    api.post("/ojs/v1/workers/ack", {"job_id": first["id"], "worker_id": "w1"})
    [second] = fetch(api)
    api.put(f"/ojs/v1/jobs/{second['id']}/progress", {"progress": 0.73, "message": "rows", "data": {"n": 73}})
    response = api.get(url)
    assert (response.status_code, response["Cache-Control"]) == (200, "no-cache")
    body = response.json()
    # ojs-progress §14.5: (1.0 + 0.73 + 0.0) / 3.
    assert (body["workflow_id"], body["type"], body["state"], body["progress"]) == (
        created["id"], "chain", "running", 0.5767)
    assert [(s["type"], s["state"], s["progress"]) for s in body["steps"]] == [
        ("extract", "completed", 1.0), ("transform", "active", 0.73), ("load", "waiting", None)]
    assert (body["steps"][1]["message"], body["steps"][1]["data"], body["steps"][1]["job_id"]) == (
        "rows", {"n": 73}, second["id"])
    # One meaning per word: the workflow's own counts say the same.
    workflow = api.get(f"/ojs/v1/workflows/{created['id']}").json()["workflow"]
    assert body["job_count"] == workflow["metadata"]["job_count"] == 3
    assert body["states"] == {"active": 1, "completed": 1, "waiting": 1}
    assert body["states"]["completed"] == workflow["metadata"]["completed_count"]


def test_a_batch_counts_completed_jobs_and_a_group_averages_nested(api):
    batch = api.post("/ojs/v1/workflows", {"type": "batch", "jobs": [step("a"), step("b"), step("c"), step("d")],
                                           "callbacks": {"on_complete": step("report")}}).json()["workflow"]
    jobs = fetch(api) + fetch(api)
    api.post("/ojs/v1/workers/ack", {"job_id": jobs[0]["id"], "worker_id": "w1"})
    api.put(f"/ojs/v1/jobs/{jobs[1]['id']}/progress", {"progress": 0.9})
    body = api.get(f"/ojs/v1/workflows/{batch['id']}/progress").json()
    assert (body["progress"], body["job_count"]) == (0.25, 4)  # callbacks are not steps


def test_nested_containers_carry_their_own_aggregate(api):
    created = api.post("/ojs/v1/workflows", {"type": "chain", "steps": [
        {"type": "group", "jobs": [step("b"), step("c")]}, step("d")]}).json()["workflow"]
    [b] = fetch(api)
    api.put(f"/ojs/v1/jobs/{b['id']}/progress", {"progress": 0.5})
    body = api.get(f"/ojs/v1/workflows/{created['id']}/progress").json()
    fan = body["steps"][0]
    assert (fan["kind"], fan["progress"], [s["progress"] for s in fan["steps"]]) == ("group", 0.25, [0.5, None])
    assert body["progress"] == 0.125


def test_workflow_progress_refuses_a_malformed_id_and_an_unknown_one(api):
    malformed = api.get("/ojs/v1/workflows/not-a-uuid/progress")
    assert (malformed.status_code, malformed.json()["error"]["code"]) == (400, "invalid_request")
    unknown = api.get(f"/ojs/v1/workflows/{uuid.uuid4()}/progress")
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "not_found")


@pytest.mark.django_db
def test_workflow_progress_needs_a_key():
    assert OJSClient(None).get(f"/ojs/v1/workflows/{uuid.uuid4()}/progress").status_code == 401


# -- growing a running batch or group (an extension: POST /ojs/v1/workflows/{id}/jobs) ----------------


def test_jobs_added_to_a_running_batch_are_answered_201_and_counted(api):
    created = api.post("/ojs/v1/workflows", {"type": "batch", "jobs": [step("a")], "callbacks": {
        "on_complete": step("report", queue="cb")}}).json()["workflow"]
    url = f"/ojs/v1/workflows/{created['id']}/jobs"
    response = api.post(url, {"jobs": [step("b"), step("c")]})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert [(job["type"], job["state"]) for job in body["jobs"]] == [("b", "available"), ("c", "available")]
    assert (body["workflow"]["jobs_total"], body["workflow"]["metadata"]["job_count"]) == (3, 3)
    assert [entry["path"] for entry in body["workflow"]["jobs"]] == ["0", "1", "2"]
    for claimed in fetch(api) + fetch(api) + fetch(api):
        assert api.post("/ojs/v1/workers/ack", {"job_id": claimed["id"], "result": claimed["type"]}).status_code == 200
    [callback] = api.post("/ojs/v1/workers/fetch", {"queues": ["cb"], "worker_id": "w1"}).json()["jobs"]
    assert sorted(callback["parent_results"]) == ["a", "b", "c"]
    # The callbacks fired: the batch takes no more (409), and nothing was stored.
    refused = api.post(url, {"jobs": [step("late")]})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "conflict"
    assert "callbacks have fired" in refused.json()["error"]["message"]
    assert not Job.objects.filter(type="late").exists()


@pytest.mark.parametrize(("body", "status", "field"), [
    ({}, 400, "jobs"),
    ({"jobs": "b"}, 400, "jobs"),
    ({"jobs": [{"type": "b", "args": 1}]}, 400, None),
    ({"jobs": [step("b")], "into": 7}, 400, "into"),
    ({"jobs": [step("b")], "into": "0"}, 400, "into"),
])
def test_bad_additions_are_400_and_change_nothing(api, body, status, field):
    created = api.post("/ojs/v1/workflows", {"type": "group", "jobs": [step("a")]}).json()["workflow"]
    response = api.post(f"/ojs/v1/workflows/{created['id']}/jobs", body)
    assert response.status_code == status, response.json()
    if field:
        assert response.json()["error"]["details"]["field"] == field
    assert Job.objects.count() == 1


def test_adding_to_an_unknown_workflow_is_404(api):
    response = api.post(f"/ojs/v1/workflows/{uuid.uuid4()}/jobs", {"jobs": [step("b")]})
    assert response.status_code == 404
