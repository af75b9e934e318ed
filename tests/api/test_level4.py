"""Level 4 over HTTP: unique replies, rate limit endpoints and headers, queue configuration,
bounded queues and dead-letter statistics."""

from __future__ import annotations

import pytest

from django_ojs.core import queue_config
from django_ojs.models import Job, Queue, RateLimitOverride
from django_ojs.protocol.failure import Failure

UNIQUE = {"keys": ["type", "args"]}


def push_body(on_conflict="reject", args=(1,), queue="u", **options):
    return {"type": "u.job", "args": list(args),
            "options": {"queue": queue, "unique": {**UNIQUE, "on_conflict": on_conflict}, **options}}


def test_unique_replies_say_what_happened(api):
    first = api.post("/ojs/v1/jobs", push_body())
    assert first.status_code == 201
    job_id = first.json()["job"]["id"]
    rejected = api.post("/ojs/v1/jobs", push_body())
    error = rejected.json()["error"]
    assert (rejected.status_code, error["code"], error["details"]["existing_job_id"]) == (409, "duplicate", job_id)
    assert len(error["details"]["uniqueness_key"]) == 64

    ignored = api.post("/ojs/v1/jobs", push_body("use_existing"))
    assert ignored.status_code == 200 and ignored.json()["deduplicated"] is True
    assert ignored.json()["job"]["id"] == job_id

    replaced = api.post("/ojs/v1/jobs", push_body("replace"))
    assert replaced.status_code == 201 and replaced.json()["replaced_job_id"] == job_id
    assert api.get(f"/ojs/v1/jobs/{job_id}").json()["job"]["state"] == "cancelled"


def test_a_batch_reports_its_deduplicated_entries(api):
    body = {"jobs": [push_body("ignore"), {"type": "plain.job", "args": []}, push_body("ignore")]}
    reply = api.post("/ojs/v1/jobs/batch", body).json()
    assert reply["count"] == 3 and reply["deduplicated"] == 1
    assert reply["jobs"][0]["id"] == reply["jobs"][2]["id"] and reply["jobs"][2]["deduplicated"] is True


@pytest.mark.parametrize(
    "unique", [{"keys": ["argz"]}, {"keys": ["meta"]}, {"states": ["done"]}, {"on_conflict": "merge"}, []]
)
def test_an_invalid_unique_policy_is_400_and_stores_nothing(api, unique):
    reply = api.post("/ojs/v1/jobs", {"type": "u.job", "args": [], "unique": unique})
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "invalid_request"
    assert not Job.objects.exists()


def test_a_rate_limited_fetch_is_empty_and_says_when_to_come_back(api):
    for _ in range(2):
        api.post("/ojs/v1/jobs", {"type": "r.job", "args": [], "options": {"queue": "r", "rate_limit": {"max_per_second": 1}}})
    first = api.post("/ojs/v1/workers/fetch", {"queues": ["r"]})
    assert len(first.json()["jobs"]) == 1 and "X-RateLimit-Limit" not in first
    held = api.post("/ojs/v1/workers/fetch", {"queues": ["r"]})
    assert held.json()["jobs"] == []
    assert (held["X-RateLimit-Key"], held["X-RateLimit-Limit"], held["X-RateLimit-Remaining"]) == ("queue:r", "1", "0")
    assert 0 < float(held["Retry-After"]) <= 1 and int(held["X-RateLimit-Reset"]) > 0


def test_rate_limits_are_listed_inspected_and_overridden(api):
    api.post("/ojs/v1/jobs", {"type": "s.job", "args": [], "options": {"queue": "s",
             "rate_limit": {"key": "stripe-api", "concurrency": 2, "rate": {"limit": 100, "period": "PT1M"}}}})
    state = api.get("/ojs/v1/rate-limits/stripe-api").json()
    assert state["concurrency"] == {"limit": 2, "active": 0, "available": 2}
    assert state["rate"]["limit"] == 100 and state["rate"]["current_count"] == 0 and state["waiting_count"] == 1
    assert [item["key"] for item in api.get("/ojs/v1/rate-limits").json()["items"]] == ["stripe-api"]

    put = api.put("/ojs/v1/rate-limits/stripe-api", {"concurrency": 0, "expires_at": "2099-01-01T00:00:00Z"})
    assert put.status_code == 200 and put.json()["concurrency"]["limit"] == 0
    assert put.json()["override"]["expires_at"] == "2099-01-01T00:00:00.000Z"
    assert api.post("/ojs/v1/workers/fetch", {"queues": ["s"]}).json()["jobs"] == []  # paused by the override
    assert api.delete("/ojs/v1/rate-limits/stripe-api").status_code == 200
    assert len(api.post("/ojs/v1/workers/fetch", {"queues": ["s"]}).json()["jobs"]) == 1
    assert api.get("/ojs/v1/rate-limits/stripe-api").json()["concurrency"]["active"] == 1


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("get", "/ojs/v1/rate-limits/nobody", None, 404),
        ("get", "/ojs/v1/rate-limits/bad%20key", None, 400),
        ("put", "/ojs/v1/rate-limits/k", {}, 400),
        ("put", "/ojs/v1/rate-limits/k", {"concurrency": -1}, 400),
        ("put", "/ojs/v1/rate-limits/k", {"rate": {"limit": 1, "period": "soon"}}, 400),
        ("put", "/ojs/v1/rate-limits/k", {"concurrency": 1, "expires_at": "tomorrow"}, 400),
        ("delete", "/ojs/v1/rate-limits/k", None, 404),
        ("put", "/ojs/v1/queues/q/config", {"max_size": 0}, 400),
        ("put", "/ojs/v1/queues/q/config", {"overflow_policy": "block"}, 400),
        ("put", "/ojs/v1/queues/q/config", {"colour": "red"}, 400),
        ("put", "/ojs/v1/queues/q/config", {"rate_limit": {"limit": 1}}, 400),
        ("put", "/ojs/v1/queues/Q!/config", {"concurrency": 1}, 400),
    ],
)
def test_bad_limit_and_config_requests_are_4xx_and_change_nothing(api, method, path, body, status):
    reply = getattr(api, method)(path, body) if body is not None else getattr(api, method)(path)
    assert reply.status_code == status
    assert not Queue.objects.filter(concurrency__isnull=False).exists()


def test_a_rate_limit_key_with_a_trailing_newline_is_refused(api):
    # "k\n" would be a limit of its own beside "k", which no job of "k" meets.
    assert api.put("/ojs/v1/rate-limits/k%0A", {"concurrency": 1}).status_code == 400
    assert api.get("/ojs/v1/rate-limits/k%0A").status_code == 400
    push = api.post("/ojs/v1/jobs", {"type": "charge.card", "args": [],
                                     "options": {"rate_limit": {"key": "k\n", "concurrency": 1}}})
    assert (push.status_code, push.json()["error"]["details"]["field"]) == (400, "options.rate_limit.key")
    assert not RateLimitOverride.objects.exists() and not Job.objects.exists()


def test_an_override_needs_the_admin_scope(make_client):
    assert make_client("read", "worker").put("/ojs/v1/rate-limits/k", {"concurrency": 1}).status_code == 403


def test_queue_configuration_is_read_and_set_over_the_api(api):
    reply = api.put("/ojs/v1/queues/mail/config",
                    {"concurrency": 5, "rate_limit": {"limit": 60, "period": "PT1M"}, "max_size": 100})
    assert reply.status_code == 200
    config = api.get("/ojs/v1/queues/mail/config").json()["config"]
    assert config == {"concurrency": 5, "rate_limit": {"limit": 60, "period": "PT1M"}, "throttle": None,
                      "max_size": 100, "overflow_policy": "reject", "fairness_key": None,
                      "fairness_weights": {}, "fairness_default_weight": 1}
    details = api.get("/ojs/v1/queues/mail").json()
    assert details["config"]["concurrency"] == 5 and details["stats"]["available"] == 0
    assert api.put("/ojs/v1/queues/mail/config", {"concurrency": None}).json()["config"]["concurrency"] is None
    state = api.get("/ojs/v1/rate-limits/queue:mail").json()
    assert "concurrency" not in state and state["rate"]["limit"] == 60


def test_a_bounded_queue_rejects_or_drops_the_oldest(api):
    api.put("/ojs/v1/queues/small/config", {"max_size": 2})
    ids = [api.post("/ojs/v1/jobs", {"type": "b.job", "args": [n], "options": {"queue": "small"}}).json()["job"]["id"]
           for n in range(2)]
    full = api.post("/ojs/v1/jobs", {"type": "b.job", "args": [3], "options": {"queue": "small"}})
    assert full.status_code == 429 and full.json()["error"]["code"] == "queue_full" and full["Retry-After"]
    assert Job.objects.filter(queue="small").count() == 2
    batch = api.post("/ojs/v1/jobs/batch", {"jobs": [{"type": "b.job", "args": [], "options": {"queue": "small"}}] * 3})
    assert batch.status_code == 429

    api.put("/ojs/v1/queues/small/config", {"overflow_policy": "drop_oldest"})
    api.post("/ojs/v1/jobs", {"type": "b.job", "args": [3], "options": {"queue": "small"}})
    dropped = api.get(f"/ojs/v1/jobs/{ids[0]}").json()["job"]
    assert dropped["state"] == "discarded" and dropped["error"]["type"] == "overflow"
    assert Job.objects.filter(queue="small").exclude(state="discarded").count() == 2


def test_a_concurrency_limit_set_on_the_queue_holds_fetch(api, push):
    queue_config.update("narrow", {"concurrency": 1})
    for _ in range(3):
        push(options={"queue": "narrow"})
    assert len(api.post("/ojs/v1/workers/fetch", {"queues": ["narrow"], "count": 3}).json()["jobs"]) == 1
    held = api.post("/ojs/v1/workers/fetch", {"queues": ["narrow"], "count": 3})
    assert held.json()["jobs"] == [] and held["X-RateLimit-Key"] == "queue:narrow"


def test_dead_letter_stats_count_by_queue_and_error_type(api, claim):
    for queue in ("a", "a", "b"):
        job = claim(options={"queue": queue, "retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}})
        error_type = "Boom" if queue == "a" else "Other"
        Job.objects.fail(job.id, Failure(type=error_type, message="x"))
    plain = claim(options={"queue": "c", "retry": {"max_attempts": 1, "on_exhaustion": "discard"}})
    Job.objects.fail(plain.id, Failure(type="Boom", message="x"))
    stats = api.get("/ojs/v1/dead-letter/stats").json()
    assert stats["total"] == 3 and sum(stats["by_queue"].values()) == 3  # claim() gives each job a queue of its own
    assert "dead_letter" not in stats  # no second count that could be read as the dead letter's
    assert stats["by_error_type"] == {"Boom": 2, "Other": 1} and stats["oldest_at"] and stats["retention"]["max_count"] == 10000


def test_the_manifest_declares_strong_unique_jobs_and_rate_limiting(api):
    capabilities = api.get("/ojs/manifest").json()["capabilities"]
    assert capabilities["unique_jobs"]["strength"] == "strong"
    assert capabilities["rate_limiting"]["window"] == "sliding"
