"""The admin API on the wire: the example project under gunicorn, every endpoint with an admin key and with
keys that lack its scope (a server process of its own, as in production).

What each endpoint answers in detail is tested in process (``test_admin_api.py``).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.urls import resolve

from django_ojs.api.admin import urls as admin_urls
from django_ojs.core import maintenance_mode
from django_ojs.core.clock import db_now
from django_ojs.core.history import MINUTE, minute_floor
from django_ojs.models import ApiKey, Job, Queue, StatsBucket, Worker
from django_ojs.protocol.durations import format_timestamp
from django_ojs.protocol.failure import Failure
from tests.api.gunicorn import serving
from tests.api.test_fuzz import snapshot
from tests.helpers import ago, database_url, history_running_since, reload, row_held
from tests.waiting import PATIENCE, wait_until

pytestmark = pytest.mark.postgres

ADMIN = "/ojs/v1/admin"
UNKNOWN = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


def call(wire: Any, method: str, path: str, body: Any = None, *, key: str | None = None) -> tuple[int, Any, Any]:
    """One request as ``key`` (the wire's admin key by default): status, headers, parsed body."""
    original = wire.key
    wire.key = key or original
    try:
        status, headers, raw = wire.send(method, path, body)
    finally:
        wire.key = original
    assert headers["OJS-Version"] == "1.0" and headers["X-Request-Id"]
    return status, headers, json.loads(raw) if raw else None


def issue(*scopes: str) -> str:
    return ApiKey.objects.issue("wire " + "+".join(scopes), scopes)[1]


def discarded(queue: str, spec: Any, on_exhaustion: str = "discard") -> Job:
    retry = {"max_attempts": 1, "on_exhaustion": on_exhaustion}
    job = Job.objects.push(spec(type="mail.send", priority=100, options={"queue": queue, "retry": retry}))
    Job.objects.fetch([queue], worker_id="w-fail")
    return Job.objects.fail(job.id, Failure(type="SMTPError", message="refused"))


# Every admin endpoint, method and path, in an order in which each answers an admin key 2xx over the
# store ``endpoint_store`` makes: {job} a waiting job, {failed} a discarded one, {letter} and {other} dead
# letters, and more in "letters" for the moves by filter. A read key, a worker's
# and a producer's key must get 403 from each that needs more than they hold.
ENDPOINTS: list[tuple[str, str, Any]] = [
    ("GET", "/queues", None),
    ("GET", "/queues/mail", None),
    ("GET", "/jobs", None),
    ("GET", "/jobs/{failed}", None),
    ("GET", "/workers", None),
    ("GET", "/workers/w1", None),
    ("GET", "/stats", None),
    ("GET", "/stats/history", None),
    ("GET", "/system/maintenance", None),
    ("GET", "/system/config", None),
    ("GET", "/dead-letter", None),
    ("GET", "/dead-letter/stats", None),
    ("GET", "/dead-letter/{letter}", None),
    ("POST", "/queues/mail/pause", {}),
    ("POST", "/queues/mail/resume", {}),
    ("PUT", "/queues/mail/config", {"concurrency": 1}),
    ("PATCH", "/queues/mail/config", {"max_size": 10}),
    ("POST", "/jobs/{job}/cancel", {}),
    ("POST", "/jobs/{failed}/retry", {}),
    ("POST", "/jobs/bulk/retry", {"filter": {"queue": "dead"}, "confirm": True}),
    ("POST", "/jobs/bulk/cancel", {"filter": {"queue": "dead"}, "confirm": True}),
    ("POST", "/jobs/bulk/delete", {"filter": {"queue": "dead"}, "confirm": True}),
    ("DELETE", "/queues/mail/jobs", {"states": ["cancelled"], "confirm": True}),
    ("POST", "/workers/w1/quiet", {}),
    ("DELETE", "/workers/w-gone", None),
    ("POST", "/dead-letter/{letter}/retry", {}),
    ("DELETE", "/dead-letter/{other}", None),
    ("POST", "/dead-letter/retry", {"filter": {"queue": "letters"}, "confirm": True}),
    ("DELETE", "/dead-letter", {"filter": {"queue": "letters"}, "confirm": True}),
    ("POST", "/system/maintenance", {"enabled": True}),
]
READ_METHODS = {"GET"}


def endpoint_store(spec: Any) -> dict[str, str]:
    """A waiting job in "mail", two discarded in "dead", two dead letters in "kept" and two in "letters",
    a live worker w1 and a dead one, w-gone."""
    job = Job.objects.push(spec(options={"queue": "mail"}))
    failed = discarded("dead", spec)
    discarded("dead", spec)
    letter, other = (discarded("kept", spec, "dead_letter") for _ in range(2))
    for _ in range(2):
        discarded("letters", spec, "dead_letter")
    Worker.objects.register("w1")
    Worker.objects.register("w-gone")
    Worker.objects.filter(pk="w-gone").update(last_heartbeat_at=ago(minutes=10))
    return {"job": str(job.id), "failed": str(failed.id), "letter": str(letter.id), "other": str(other.id)}


def routes_served() -> set[tuple[str, str]]:
    """(method, route) of every admin view, as ``api/admin/urls.py`` declares them."""
    served = set()
    for pattern in admin_urls.urlpatterns:
        view = pattern.callback.view_class  # type: ignore[attr-defined]
        for method in view.http_method_names:
            if method not in ("options", "head") and hasattr(view, method):
                served.add((method.upper(), str(pattern.pattern)))
    return served


def test_the_endpoint_table_names_every_admin_route_and_method():
    """A new endpoint, or a new method of one, joins ENDPOINTS: the scope checks below then cover it."""
    unknown = dict.fromkeys(("job", "failed", "letter", "other"), UNKNOWN)
    tabled = {(method, resolve(ADMIN + path.format(**unknown)).route.removeprefix("ojs/v1/admin/"))
              for method, path, _ in ENDPOINTS}
    assert tabled == routes_served()


def test_every_admin_endpoint_answers_an_admin_key(wire, spec):
    ids = endpoint_store(spec)
    for method, path, body in ENDPOINTS:
        status, _, answer = call(wire, method, ADMIN + path.format(**ids), body)
        assert 200 <= status < 300, (method, path, answer)
    assert maintenance_mode.current(fresh=True).enabled
    assert Queue.objects.get(name="mail").max_size == 10 and not Worker.objects.filter(pk="w-gone").exists()
    assert not Job.objects.filter(queue="dead").exists() and not Job.objects.filter(state="cancelled").exists()


def test_every_admin_endpoint_refuses_a_key_without_its_scope_and_changes_nothing(wire, spec):
    ids = endpoint_store(spec)
    worker_key, enqueue_key, read_key = issue("worker"), issue("enqueue"), issue("read")
    before = snapshot()
    for method, path, body in ENDPOINTS:
        path = ADMIN + path.format(**ids)
        refused = (worker_key, enqueue_key) if method in READ_METHODS else (read_key, worker_key, enqueue_key)
        needed = "read or admin" if method in READ_METHODS else "admin"
        for key in refused:
            status, _, answer = call(wire, method, path, body, key=key)
            assert (status, answer["error"]["code"], answer["error"]["details"]["required_scope"]) == (
                403, "forbidden", needed), (method, path, key)
        if method in READ_METHODS:
            assert call(wire, method, path, key=read_key)[0] == 200, path
        status, headers, _ = wire.send(method, path, body, key=False)
        assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="ojs"', (method, path)
    assert snapshot() == before and not maintenance_mode.current(fresh=True).enabled


def test_queues_on_the_wire(wire, spec):
    for _ in range(2):
        Job.objects.push(spec(options={"queue": "mail"}))
    old = discarded("mail", spec)
    Job.objects.filter(pk=old.pk).update(finished_at=ago(days=30))

    status, _, listed = call(wire, "GET", f"{ADMIN}/queues")
    assert status == 200 and listed["items"][0]["counts"]["available"] == 2
    assert call(wire, "GET", f"{ADMIN}/queues/mail")[2]["counts"]["discarded"] == 1
    assert call(wire, "POST", f"{ADMIN}/queues/mail/pause")[2]["paused"] is True
    worker_key = issue("worker")
    assert call(wire, "POST", "/ojs/v1/workers/fetch", {"queues": ["mail"]}, key=worker_key)[2]["jobs"] == []
    assert call(wire, "POST", f"{ADMIN}/queues/mail/resume")[2]["paused"] is False
    configured = call(wire, "PUT", f"{ADMIN}/queues/mail/config", {"concurrency": 3, "max_size": 10})[2]
    assert configured["configuration"]["concurrency"] == 3 and Queue.objects.get(name="mail").max_size == 10
    purge = {"states": ["discarded"], "older_than": (db_now() - dt.timedelta(days=7)).isoformat()}
    assert call(wire, "DELETE", f"{ADMIN}/queues/mail/jobs", purge)[0] == 400  # no confirm
    status, _, purged = call(wire, "DELETE", f"{ADMIN}/queues/mail/jobs", {**purge, "confirm": True})
    assert (status, purged["purged_count"]) == (200, 1) and not Job.objects.filter(pk=old.pk).exists()


def test_jobs_and_bulk_moves_on_the_wire(wire, spec):
    waiting = [Job.objects.push(spec(type="mail.send", options={"queue": "mail"})) for _ in range(3)]
    failed = [discarded("dead", spec) for _ in range(2)]

    first = call(wire, "GET", f"{ADMIN}/jobs?per_page=2")[2]
    rest = call(wire, "GET", f"{ADMIN}/jobs?per_page=2&cursor={first['pagination']['next_cursor']}")[2]
    shown = [item["id"] for item in first["items"] + rest["items"]]
    assert len(shown) == 4 and len(set(shown)) == 4 and first["pagination"]["total"] == 5
    assert {item["id"] for item in call(wire, "GET", f"{ADMIN}/jobs?state=discarded")[2]["items"]} == {
        str(job.id) for job in failed}
    detail = call(wire, "GET", f"{ADMIN}/jobs/{failed[0].id}")[2]
    assert detail["errors"][0]["type"] == "SMTPError" and detail["events"]

    assert call(wire, "POST", f"{ADMIN}/jobs/{waiting[0].id}/cancel")[2]["job"]["state"] == "cancelled"
    assert call(wire, "POST", f"{ADMIN}/jobs/{failed[0].id}/retry")[2]["job"]["state"] == "available"
    assert call(wire, "POST", f"{ADMIN}/jobs/bulk/retry", {"filter": {"queue": "dead"}})[0] == 400
    assert reload(failed[1]).state == "discarded"
    assert call(wire, "POST", f"{ADMIN}/jobs/bulk/retry",
                {"filter": {"queue": "dead", "state": "discarded"}, "confirm": True})[2]["succeeded"] == 1
    assert call(wire, "POST", f"{ADMIN}/jobs/bulk/cancel",
                {"filter": {"queue": "mail"}, "confirm": True})[2]["succeeded"] == 2
    deleted = call(wire, "POST", f"{ADMIN}/jobs/bulk/delete", {"filter": {"state": "cancelled"}, "confirm": True})[2]
    assert deleted["succeeded"] == 3 and set(Job.objects.values_list("state", flat=True)) == {"available"}


def test_workers_on_the_wire(wire, spec):
    worker_key = issue("worker")
    call(wire, "POST", "/ojs/v1/workers/register", {"worker_id": "w1", "queues": ["mail"]}, key=worker_key)
    Worker.objects.register("w-gone")
    held = Job.objects.push(spec(options={"queue": "gone"}))
    Job.objects.fetch(["gone"], worker_id="w-gone")
    Worker.objects.filter(pk="w-gone").update(last_heartbeat_at=ago(minutes=10))

    listed = call(wire, "GET", f"{ADMIN}/workers")[2]
    assert listed["summary"] == {"total": 2, "running": 1, "quiet": 0, "draining": 0, "dead": 1}
    assert call(wire, "GET", f"{ADMIN}/workers/w-gone")[2]["jobs"][0]["id"] == str(held.id)
    assert call(wire, "POST", f"{ADMIN}/workers/w1/quiet")[2]["directive"] == "quiet"
    beat = call(wire, "POST", "/ojs/v1/workers/heartbeat", {"worker_id": "w1"}, key=worker_key)[2]
    assert beat["state"] == "quiet"
    assert call(wire, "DELETE", f"{ADMIN}/workers/w1")[0] == 409
    assert call(wire, "DELETE", f"{ADMIN}/workers/w-gone")[2]["jobs_requeued"] == 1
    assert reload(held).state == "available" and not Worker.objects.filter(pk="w-gone").exists()


def test_statistics_and_their_history_on_the_wire(wire, spec):
    Job.objects.push(spec(options={"queue": "mail"}))
    discarded("mail", spec)
    now = db_now()
    history_running_since(minute_floor(now) - dt.timedelta(days=1))
    minute = minute_floor(now) - dt.timedelta(minutes=3)
    StatsBucket.objects.create(span=MINUTE, start=minute, queue="mail", transition="completed", count=12)

    stats = call(wire, "GET", f"{ADMIN}/stats")[2]
    assert (stats["jobs"]["available"], stats["jobs"]["discarded"], stats["queues"]) == (1, 1, 1)
    since = (minute - dt.timedelta(minutes=1)).isoformat()
    status, _, found = call(wire, "GET", f"{ADMIN}/stats/history?period=1m&since={since.replace('+', '%2B')}")
    assert status == 200 and found["data"][1] == {
        "timestamp": format_timestamp(minute), "processed": 12, "failed": 0, "enqueued": 0,
        "retried": 0, "cancelled": 0}


def test_maintenance_mode_on_the_wire_seen_by_every_process(wire, spec):
    status, _, entered = call(wire, "POST", f"{ADMIN}/system/maintenance",
                              {"enabled": True, "reason": "migration", "estimated_duration": "PT10M"})
    assert status == 200 and entered["maintenance"] is True
    status, headers, refused = call(wire, "POST", "/ojs/v1/jobs", {"type": "a", "args": []})
    assert status == 503 and 500 <= int(headers["Retry-After"]) <= 600
    assert refused["error"]["code"] == "backend_unavailable" and refused["error"]["retryable"] is True
    # This process reads the row the server wrote.
    assert maintenance_mode.current(fresh=True).reason == "migration"
    Job.objects.push(spec(options={"queue": "mail"}))  # in-process producers' jobs are stored and wait
    worker_key = issue("worker")
    assert call(wire, "POST", "/ojs/v1/workers/fetch", {"queues": ["mail"]}, key=worker_key)[2]["jobs"] == []
    health = call(wire, "GET", "/ojs/v1/health")
    assert health[0] == 200 and health[2]["maintenance"]["reason"] == "migration"
    config = call(wire, "GET", f"{ADMIN}/system/config")[2]
    assert config["maintenance"]["enabled"] is True and "HEARTBEAT_TIMEOUT" in config["settings"]

    # Left in another process (here): the server resumes within its cache's time.
    maintenance_mode.leave()
    wait_until(lambda: call(wire, "POST", "/ojs/v1/workers/fetch", {"queues": ["mail"]}, key=worker_key)[2]["jobs"],
               PATIENCE, "the server to hand out jobs again")
    assert call(wire, "POST", "/ojs/v1/jobs", {"type": "a", "args": []})[0] == 201
    assert call(wire, "GET", f"{ADMIN}/system/maintenance")[2]["maintenance"] is False


def test_the_manifest_on_the_wire_announces_the_admin_api(wire):
    status, _, manifest = call(wire, "GET", "/ojs/manifest")
    assert status == 200 and "admin-api" in manifest["extensions"]
    assert manifest["endpoints"]["admin"] == ADMIN


def test_the_config_on_the_wire_shows_no_secret(transactional_db, monkeypatch):
    """A server whose database URL holds a password and whose SECRET_KEY is its own: neither, nor any API
    key or its digest, is in what ``system/config`` answers; the database's name and host are."""
    monkeypatch.setenv("SECRET_KEY", "django-s3cret-key-of-this-deployment-0123456789")
    url = urlsplit(database_url())
    with_password = url._replace(netloc=f"{url.username}:pg-s3cret-pw@{url.hostname}:{url.port}").geturl()
    _, admin_key = ApiKey.objects.issue("config admin", ["admin"])
    _, other_key = ApiKey.objects.issue("config producer", ["enqueue"])
    with serving(admin_key, database=with_password) as server:
        status, _, raw = server.send("GET", f"{ADMIN}/system/config")
    assert status == 200
    text = raw.decode()
    body = json.loads(text)
    assert body["backend"] == {"vendor": "postgresql", "name": url.path.lstrip("/"), "host": url.hostname,
                               "port": str(url.port)}
    secrets = ["pg-s3cret-pw", "django-s3cret-key-of-this-deployment", admin_key, other_key,
               *ApiKey.objects.values_list("key_hash", flat=True)]
    assert [secret for secret in secrets if secret in text] == []


def test_a_bulk_move_on_the_wire_passes_over_a_row_another_connection_holds(wire, spec):
    """A worker's transaction holds one job FOR UPDATE through the whole request: the move answers
    without waiting for it, names it as busy, and moves the rest; the same request takes it once free."""
    held, free = discarded("dead", spec), discarded("dead", spec)
    request = {"filter": {"queue": "dead", "state": "discarded"}, "confirm": True}
    with row_held(held, PATIENCE) as holder:
        status, _, report = call(wire, "POST", f"{ADMIN}/jobs/bulk/retry", request)
        still_held = holder.is_alive()
    assert still_held, "the lock was let go before the move answered: it may have waited for it"
    assert (status, report["succeeded"], report["failed"], report["skipped_by_reason"]) == (200, 1, 1, {"busy": 1})
    assert report["errors"] == [{"job_id": str(held.id), "reason": "busy", "error": report["errors"][0]["error"]}]
    assert reload(free).state == "available" and reload(held).state == "discarded"
    assert call(wire, "POST", f"{ADMIN}/jobs/bulk/retry", request)[2]["succeeded"] == 1
    assert reload(held).state == "available"
