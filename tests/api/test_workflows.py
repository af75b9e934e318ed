"""Workflows over HTTP (ojs-http-binding §14, ojs-workflows §11): create, read, cancel, refuse."""

from __future__ import annotations

import uuid

import pytest

from django_ojs.models import Event, Job, Workflow
from tests.conftest import MEDIA_TYPE


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
