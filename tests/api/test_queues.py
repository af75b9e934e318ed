"""Queue listing, statistics, pause and resume over HTTP (ojs-http-binding §11)."""

from __future__ import annotations

import pytest

from django_ojs.models import Job, Queue


def test_the_queue_list_shows_every_queue_used_with_its_status(api, push):
    push(options={"queue": "b"})
    push(options={"queue": "a"})
    Queue.objects.pause("b")
    body = api.get("/ojs/v1/queues").json()
    assert [(q["name"], q["status"], q["paused"]) for q in body["queues"]] == [
        ("a", "active", False), ("b", "paused", True)]
    assert body["pagination"] == {"limit": 50, "offset": 0, "has_more": False}


def test_the_queue_list_pages_with_a_cursor(api, push):
    for name in ("q1", "q2", "q3"):
        push(options={"queue": name})
    first = api.get("/ojs/v1/queues?limit=2").json()
    assert [q["name"] for q in first["queues"]] == ["q1", "q2"]
    second = api.get(f"/ojs/v1/queues?limit=2&cursor={first['pagination']['next_cursor']}").json()
    assert [q["name"] for q in second["queues"]] == ["q3"]
    assert second["pagination"]["has_more"] is False


@pytest.mark.parametrize("query", ["limit=0", "limit=abc", "offset=-1", "cursor=forged"])
def test_bad_list_parameters_are_400(api, query):
    assert api.get(f"/ojs/v1/queues?{query}").status_code == 400


def test_queue_stats_count_jobs_by_state(api, push):
    for _ in range(4):
        push(options={"queue": "email"})
    push(options={"queue": "other"})
    [done, _] = Job.objects.fetch(["email"], count=2)
    Job.objects.ack(done.id)
    body = api.get("/ojs/v1/queues/email/stats").json()
    queue = body["queue"]
    assert (queue["name"], queue["status"], queue["available"], queue["active"], queue["completed"]) == (
        "email", "active", 2, 1, 1)
    assert body["stats"]["available"] == 2 and body["stats"]["completed_last_hour"] == 1
    assert body["computed_at"].endswith("Z")


def test_stats_of_an_unused_queue_are_zero(api):
    body = api.get("/ojs/v1/queues/never-used/stats").json()
    assert body["queue"]["available"] == 0
    # As the admin API's oldest_available_age_seconds and the metrics' gauge: 0 when none waits.
    assert (body["stats"]["oldest_available_age_ms"], body["stats"]["oldest_available_exact"]) == (0, True)


def test_pause_stops_delivery_enqueue_still_works_and_resume_restores_it(api):
    response = api.post("/ojs/v1/queues/mail/pause", {})
    assert response.status_code == 200
    body = response.json()
    assert (body["queue"]["name"], body["queue"]["paused"], body["status"]) == ("mail", True, "paused")
    assert body["queue"]["paused_at"]
    assert api.post("/ojs/v1/jobs", {"type": "a", "args": [], "options": {"queue": "mail"}}).status_code == 201
    assert api.post("/ojs/v1/workers/fetch", {"queues": ["mail"]}).json()["jobs"] == []
    resumed = api.post("/ojs/v1/queues/mail/resume").json()
    assert (resumed["queue"]["paused"], resumed["status"]) == (False, "active")
    assert len(api.post("/ojs/v1/workers/fetch", {"queues": ["mail"]}).json()["jobs"]) == 1


@pytest.mark.parametrize("action", ["pause", "resume", "stats"])
def test_a_malformed_queue_name_is_400(api, action):
    method = api.get if action == "stats" else api.post
    response = method(f"/ojs/v1/queues/Bad_Name/{action}")
    assert response.status_code == 400
    assert not Queue.objects.exists()
