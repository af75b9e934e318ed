"""Cron registration, listing and removal over HTTP (ojs-http-binding §13, ojs-cron §8)."""

from __future__ import annotations

import pytest

from django_ojs.models import CronJob

OPENAPI_SHAPE = {"name": "nightly-report", "expression": "0 9 * * *", "timezone": "Europe/Paris",
                 "job_template": {"type": "report.build", "args": [1], "options": {"queue": "reports"}},
                 "overlap_policy": "skip"}


def test_register_answers_201_with_both_spellings(api):
    response = api.post("/ojs/v1/cron", OPENAPI_SHAPE)
    assert response.status_code == 201
    body = response.json()
    assert body["cron"] == body["cron_job"]
    cron = body["cron"]
    assert (cron["name"], cron["expression"], cron["cron"], cron["timezone"], cron["type"], cron["args"]) == (
        "nightly-report", "0 9 * * *", "0 9 * * *", "Europe/Paris", "report.build", [1])
    assert (cron["enabled"], cron["status"], cron["overlap_policy"], cron["run_count"]) == (True, "active", "skip", 0)
    assert cron["next_run_at"].endswith("Z") and cron["created_at"]


def test_registering_the_same_name_again_is_an_upsert_answering_200(api):
    api.post("/ojs/v1/cron", OPENAPI_SHAPE)
    response = api.post("/ojs/v1/cron", {**OPENAPI_SHAPE, "expression": "0 10 * * *"})
    assert response.status_code == 200
    assert response.json()["cron"]["expression"] == "0 10 * * *"
    assert CronJob.objects.count() == 1


def test_the_bindings_flat_shape_is_accepted(api):
    body = {"name": "flat", "cron": "*/5 * * * *", "type": "a.b", "args": [], "options": {"queue": "q"},
            "overlap_policy": "cancel"}
    cron = api.post("/ojs/v1/cron", body).json()["cron"]
    assert (cron["expression"], cron["job_template"]["options"], cron["overlap_policy"]) == (
        "*/5 * * * *", {"queue": "q"}, "cancel_previous")


def test_list_get_and_delete(api):
    api.post("/ojs/v1/cron", OPENAPI_SHAPE)
    api.post("/ojs/v1/cron", {**OPENAPI_SHAPE, "name": "another", "enabled": False})
    listing = api.get("/ojs/v1/cron").json()
    assert [c["name"] for c in listing["crons"]] == ["another", "nightly-report"]
    assert listing["cron_jobs"] == listing["crons"] and listing["count"] == 2
    assert [c["name"] for c in api.get("/ojs/v1/cron?enabled=false").json()["crons"]] == ["another"]
    assert api.get("/ojs/v1/cron/another").json()["cron"]["status"] == "disabled"
    deleted = api.delete("/ojs/v1/cron/nightly-report").json()
    assert (deleted["deleted"], deleted["name"], deleted["cron"]["name"]) == (True, "nightly-report", "nightly-report")
    assert api.get("/ojs/v1/cron/nightly-report").status_code == 404
    assert api.delete("/ojs/v1/cron/nightly-report").status_code == 404


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"expression": "61 * * * *"}, "expression"),
        ({"expression": "* * *"}, "expression"),
        ({"expression": "not cron"}, "expression"),
        ({"expression": ""}, "expression"),
        ({"expression": 5}, "expression"),
        ({"expression": "0 0 30 2 *"}, "expression"),  # February 30th never comes
        ({"timezone": "Mars/Olympus"}, "expression"),
        ({"timezone": "EST"}, "expression"),
        ({"timezone": "+02:00"}, "expression"),
        ({"timezone": 1}, "expression"),
        ({"name": "Bad Name"}, "name"),
        ({"name": ""}, "name"),
        ({"name": None}, "name"),
        ({"overlap_policy": "sometimes"}, "overlap_policy"),
        ({"enabled": "yes"}, "enabled"),
        ({"description": 5}, "description"),
        ({"job_template": {"args": []}}, "job_template.type"),
        ({"job_template": {"type": "a", "args": "x"}}, "job_template.args"),
        ({"job_template": {"type": "a", "args": [], "id": "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"}},
         "job_template.id"),
        ({"job_template": "report.build"}, "job_template"),
    ],
)
def test_invalid_registrations_are_400_naming_the_field(api, changes, field):
    response = api.post("/ojs/v1/cron", {**OPENAPI_SHAPE, **changes})
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == field
    assert not CronJob.objects.exists()


def test_a_template_with_an_invalid_retry_policy_is_422(api):
    template = {**OPENAPI_SHAPE["job_template"], "options": {"retry": {"max_attempts": -1}}}
    assert api.post("/ojs/v1/cron", {**OPENAPI_SHAPE, "job_template": template}).status_code == 422
    assert not CronJob.objects.exists()


def test_a_malformed_cron_name_in_the_path_is_400(api):
    assert api.get("/ojs/v1/cron/Bad_Name").status_code == 400
