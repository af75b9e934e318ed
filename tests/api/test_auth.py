"""API keys and scopes (ojs-http-binding §5): 401, 403, revocation, open mode."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_ojs.keys import key_cache
from django_ojs.models import ApiKey, Job, Queue
from django_ojs.protocol.failure import Failure
from tests.conftest import OJSClient
from tests.waiting import PATIENCE, wait_until

UNKNOWN = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


def error_of(response):
    return response.json()["error"]


@pytest.mark.parametrize("header", [None, "Bearer ojs_not_a_key", "Bearer ", "Basic dXNlcjpwYXNz", "ojs_bare"])
def test_a_missing_or_bad_key_is_401_with_www_authenticate(db, header):
    client = OJSClient(None)
    extra = {"HTTP_AUTHORIZATION": header} if header is not None else {}
    response = client.post("/ojs/v1/jobs", {"type": "a", "args": []}, **extra)
    assert response.status_code == 401
    assert error_of(response)["code"] == "unauthenticated"
    assert response["WWW-Authenticate"] == 'Bearer realm="ojs"'
    assert not Job.objects.exists()


def test_a_revoked_key_is_401(db):
    key, secret = ApiKey.objects.issue("old", ["admin"])
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    assert OJSClient(secret).get("/ojs/v1/queues").status_code == 401


def test_the_bearer_scheme_is_case_insensitive(db):
    _, secret = ApiKey.objects.issue("k", ["read"])
    client = OJSClient(None)
    assert client.get("/ojs/v1/queues", HTTP_AUTHORIZATION=f"bearer {secret}").status_code == 200


# (scope of the key, method, path, body) -> 403 and nothing changes.
FORBIDDEN = [
    ("worker", "delete", f"/ojs/v1/dead-letter/{UNKNOWN}", None),
    ("worker", "post", f"/ojs/v1/dead-letter/{UNKNOWN}/retry", {}),
    ("worker", "post", "/ojs/v1/queues/default/pause", {}),
    ("worker", "post", "/ojs/v1/queues/default/resume", {}),
    ("worker", "post", "/ojs/v1/cron", {"name": "c"}),
    ("worker", "post", "/ojs/v1/jobs", {"type": "a", "args": []}),
    ("enqueue", "post", "/ojs/v1/workers/fetch", {"queues": ["default"]}),
    ("enqueue", "post", "/ojs/v1/workers/ack", {"job_id": UNKNOWN}),
    ("enqueue", "post", "/ojs/v1/workers/ack/batch", {"acks": [{"job_id": UNKNOWN}]}),
    ("read", "post", "/ojs/v1/workers/ack/batch", {"acks": [{"job_id": UNKNOWN}]}),
    ("enqueue", "post", "/ojs/v1/workers/heartbeat", {"worker_id": "w"}),
    ("enqueue", "delete", "/ojs/v1/cron/c", None),
    ("read", "post", "/ojs/v1/jobs", {"type": "a", "args": []}),
    ("read", "post", "/ojs/v1/jobs/batch", {"jobs": [{"type": "a", "args": []}]}),
    ("read", "delete", f"/ojs/v1/jobs/{UNKNOWN}", None),
    ("enqueue", "delete", f"/ojs/v1/jobs/{UNKNOWN}", None),
    ("worker", "delete", f"/ojs/v1/jobs/{UNKNOWN}", None),
    ("enqueue", "delete", f"/ojs/v1/workflows/{UNKNOWN}", None),
    ("cancel", "post", "/ojs/v1/jobs", {"type": "a", "args": []}),
    ("cancel", "post", f"/ojs/v1/jobs/{UNKNOWN}/activate", {}),
    ("cancel", "post", f"/ojs/v1/admin/jobs/{UNKNOWN}/cancel", {}),
    ("cancel", "post", "/ojs/v1/admin/jobs/bulk/cancel", {"filter": {}, "confirm": True}),
    ("read", "post", "/ojs/v1/workers/nack", {"job_id": UNKNOWN}),
    ("admin", "post", "/ojs/v1/queues/Bad_Name/pause", None),  # admin passes auth: 400, not 403
]


@pytest.mark.parametrize(("scope", "method", "path", "body"), FORBIDDEN)
def test_a_key_without_the_operations_scope_is_403(make_client, scope, method, path, body):
    client = make_client(scope)
    response = client.post(path, body) if method == "post" else client.delete(path)
    if scope == "admin":
        assert response.status_code == 400
        return
    assert response.status_code == 403
    error = error_of(response)
    assert error["code"] == "forbidden"
    assert error["details"]["key_scopes"] == [scope]
    assert not Job.objects.exists() and not Queue.objects.filter(paused=True).exists()


def test_a_worker_key_cannot_purge_the_dead_letter_but_an_admin_key_can(make_client, claim):
    job = claim(options={"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}})
    Job.objects.fail(job.id, Failure(type="E", message=""))
    assert make_client("worker").delete(f"/ojs/v1/dead-letter/{job.id}").status_code == 403
    assert Job.objects.filter(pk=job.pk).exists()
    assert make_client("admin").delete(f"/ojs/v1/dead-letter/{job.id}").status_code == 200


# What lists or inspects the system: ojs-security §7.5 gives it to operators (read) and admins.
INSPECTING = ("/ojs/v1/queues", "/ojs/v1/queues/default", "/ojs/v1/queues/default/stats",
              "/ojs/v1/queues/default/config", "/ojs/v1/dead-letter", "/ojs/v1/dead-letter/stats",
              "/ojs/v1/cron", "/ojs/v1/rate-limits", "/ojs/v1/events", "/ojs/v1/metrics")


@pytest.mark.parametrize("scope", ["read", "admin"])
def test_a_read_or_admin_key_lists_and_inspects(make_client, scope, ojs):
    pytest.importorskip("prometheus_client")
    ojs(METRICS=True)
    client = make_client(scope)
    for path in INSPECTING[:-1]:
        assert client.get(path).status_code == 200, path
    assert client.client.get("/ojs/v1/metrics").status_code == 200  # text, not the binding's JSON


@pytest.mark.parametrize("scope", ["enqueue", "worker"])
def test_a_producers_or_workers_key_lists_nothing_but_reads_a_job_by_its_id(make_client, scope, push, ojs):
    """Any key listed the dead letter (every failed job's arguments and errors), the queues, the events
    and the metrics, where ojs-security §7.5 lets neither producers nor workers inspect or list."""
    ojs(METRICS=True)
    client = make_client(scope)
    for path in INSPECTING:
        response = client.get(path)
        assert response.status_code == 403, path
        assert response.json()["error"]["details"]["required_scope"] == "read or admin"
    # The id it got back from PUSH (or FETCH) reads that one job, its result and its progress.
    job = push()
    for path in (f"/ojs/v1/jobs/{job.id}", f"/ojs/v1/jobs/{job.id}/result", f"/ojs/v1/jobs/{job.id}/progress"):
        assert client.get(path).status_code == 200, path


def test_head_needs_what_get_needs_and_options_only_read(make_client, push):
    job = push()
    client = make_client("read")
    for path in (f"/ojs/v1/jobs/{job.id}", "/ojs/v1/cron"):
        assert client.client.head(path).status_code == 200, path
        assert client.client.options(path).status_code == 200, path


def test_a_key_with_two_scopes_can_enqueue_and_work(make_client):
    client = make_client("enqueue", "worker")
    job_id = client.post("/ojs/v1/jobs", {"type": "a", "args": []}).json()["job"]["id"]
    assert client.post("/ojs/v1/workers/fetch", {"queues": ["default"]}).json()["jobs"][0]["id"] == job_id


def test_with_auth_not_required_the_api_is_open(db, ojs):
    ojs(AUTH_REQUIRED=False)
    client = OJSClient(None)
    assert client.post("/ojs/v1/jobs", {"type": "a", "args": []}).status_code == 201
    assert client.post("/ojs/v1/queues/default/pause").status_code == 200
    # A bad key is not an error either: nothing is checked.
    assert client.get("/ojs/v1/queues", HTTP_AUTHORIZATION="Bearer nonsense").status_code == 200


def test_last_used_at_is_refreshed_at_most_once_a_minute(db):
    key, secret = ApiKey.objects.issue("k", ["read"])
    client = OJSClient(secret)
    client.get("/ojs/v1/queues")
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None and timezone.now() - first < dt.timedelta(minutes=1)
    client.get("/ojs/v1/queues")
    assert ApiKey.objects.get(pk=key.pk).last_used_at == first
    stale = timezone.now() - dt.timedelta(minutes=5)
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=stale)
    key_cache.forget()  # the row changed behind this process's back, as if a minute had passed
    client.get("/ojs/v1/queues")
    assert ApiKey.objects.get(pk=key.pk).last_used_at > stale + dt.timedelta(minutes=4)


def test_keys_are_stored_hashed(db):
    key, secret = ApiKey.objects.issue("k", ["worker"])
    stored = ApiKey.objects.get(pk=key.pk)
    assert secret not in (stored.key_hash, stored.prefix) and secret.startswith(stored.prefix)
    assert ApiKey.objects.authenticate(secret) == stored


def test_the_management_command_issues_a_working_key(db):
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("ojs_create_api_key", "ci", "--scope", "worker", "--quiet", stdout=out)
    secret = out.getvalue().strip()
    assert OJSClient(secret).post("/ojs/v1/workers/fetch", {"queues": ["default"]}).status_code == 200
    assert OJSClient(secret).post("/ojs/v1/jobs", {"type": "a", "args": []}).status_code == 403


# -- The verified-key cache (keys.py KeyCache) -------------------------------


def test_a_key_revoked_by_another_process_stops_working_within_the_cache_time(db, ojs):
    ojs(API_KEY_CACHE_SECONDS=0.5)
    key, secret = ApiKey.objects.issue("k", ["read"])
    client = OJSClient(secret)
    assert client.get("/ojs/v1/queues").status_code == 200
    # Another process revokes it: this one cannot know until its cache entry lapses.
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    wait_until(lambda: client.get("/ojs/v1/queues").status_code == 401, timeout=PATIENCE, what="the revocation")


def test_a_key_revoked_in_this_process_stops_working_at_once(db, ojs):
    ojs(API_KEY_CACHE_SECONDS=3600)
    key, secret = ApiKey.objects.issue("k", ["read"])
    client = OJSClient(secret)
    assert client.get("/ojs/v1/queues").status_code == 200
    assert ApiKey.objects.revoke([key.pk]) == 1
    assert client.get("/ojs/v1/queues").status_code == 401


def test_a_verified_key_costs_no_query_until_its_cache_time_is_over(db, ojs):
    ojs(API_KEY_CACHE_SECONDS=3600)
    _, secret = ApiKey.objects.issue("k", ["read"])
    client = OJSClient(secret)
    assert client.get("/ojs/v1/queues").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/ojs/v1/queues").status_code == 200
    assert not [q for q in queries.captured_queries if "django_ojs_apikey" in q["sql"]]


def test_with_the_cache_off_a_revocation_anywhere_counts_at_once(db, ojs):
    ojs(API_KEY_CACHE_SECONDS=0)
    key, secret = ApiKey.objects.issue("k", ["read"])
    client = OJSClient(secret)
    assert client.get("/ojs/v1/queues").status_code == 200
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    assert client.get("/ojs/v1/queues").status_code == 401


def test_an_expired_key_is_401_named_expired_and_logged_once(db, caplog):
    key, secret = ApiKey.objects.issue("k", ["read"], expires_in=dt.timedelta(days=1))
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    key_cache.forget()
    client = OJSClient(secret)
    with caplog.at_level("WARNING", logger="django_ojs.api"):
        answers = [client.get("/ojs/v1/queues") for _ in range(2)]
    assert [answer.status_code for answer in answers] == [401, 401]
    assert all("expired at" in error_of(answer)["message"] for answer in answers)
    logged = [record.getMessage() for record in caplog.records if "expired" in record.getMessage()]
    assert logged == [f"API key {key.prefix}… (k) expired at {error_of(answers[0])['details']['expired_at']}: "
                      "its requests are refused"]
    assert ApiKey.objects.get(pk=key.pk).status(timezone.now()) == "expired"


def test_keys_are_not_bound_to_the_jobs_they_made_or_fetched_but_a_lease_given_is(make_client):
    """Decisions, "what a key may do to a job it did not make or claim": cancelling needs the scope, not the job's
    producer; the binding's ACK names only the job."""
    producer, withdrawing_producer = make_client("enqueue"), make_client("enqueue", "cancel")
    fleet, other_fleet = make_client("worker"), make_client("worker")
    job = producer.post("/ojs/v1/jobs", {"type": "a", "args": [], "options": {"queue": "q1"}}).json()["job"]
    assert producer.delete(f"/ojs/v1/jobs/{job['id']}").status_code == 403
    assert withdrawing_producer.delete(f"/ojs/v1/jobs/{job['id']}").json()["job"]["state"] == "cancelled"

    producer.post("/ojs/v1/jobs", {"type": "a", "args": [], "options": {"queue": "q2"}})
    job = fleet.post("/ojs/v1/workers/fetch", {"queues": ["q2"], "worker_id": "w1"}).json()["job"]
    foreign = other_fleet.post("/ojs/v1/workers/ack", {"job_id": job["id"], "worker_id": "w2", "attempt": job["attempt"]})
    assert foreign.status_code == 409
    assert other_fleet.post("/ojs/v1/workers/ack", {"job_id": job["id"]}).json()["state"] == "completed"


def test_a_producers_key_given_cancel_in_place_cancels_within_the_cache_time(make_client, ojs):
    """Upgrading, "Cancelling needs the cancel scope": the scope added to the key, which keeps its secret."""
    ojs(API_KEY_CACHE_SECONDS=0.5)
    producer = make_client("enqueue")
    job = producer.post("/ojs/v1/jobs", {"type": "a", "args": []}).json()["job"]
    assert producer.delete(f"/ojs/v1/jobs/{job['id']}").status_code == 403
    key = ApiKey.objects.get(name="test", revoked_at=None)
    key.scopes = [*key.scopes, "cancel"]
    key.save(update_fields=["scopes"])
    wait_until(lambda: producer.delete(f"/ojs/v1/jobs/{job['id']}").status_code == 200, timeout=PATIENCE,
               what="the added scope")
    assert Job.objects.get(id=job["id"]).state == "cancelled"
