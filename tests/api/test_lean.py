"""The lean POST of PUSH, FETCH and ACK (api/lean.py) answers exactly as the DRF view it stands for.

Each request is sent twice, built the same way: once to ``LeanPost(View)``
(what the URLs serve) and once to ``View.as_view()`` (DRF's path, which the
other methods still take). Status, the binding's headers and the body must
match, for success and for every class of error. On the wire, the same
endpoints keep the 405 before credentials, every Accept and the body limit.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.test import RequestFactory

from django_ojs.api import jobs, workers
from django_ojs.api.plain_views import LeanPost
from django_ojs.conf import ojs_settings
from django_ojs.models import ApiKey, Job

MEDIA_TYPE = "application/openjobspec+json"
HEADERS = ("Content-Type", "Allow", "OJS-Version", "Location", "WWW-Authenticate", "Retry-After")
UNKNOWN = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
# The fields of a job that differ between two PUSHes of the same envelope.
PER_JOB = {"id", "created_at", "enqueued_at"}


@pytest.fixture
def keys(db):
    return {scope: ApiKey.objects.issue(scope, [scope])[1] for scope in ("admin", "enqueue", "worker", "read")}


def _answer(view: Any, *, path: str, raw: bytes | None, content_type: str | None, key: str | None,
            headers: dict[str, str], method: str) -> tuple[int, dict[str, str], Any]:
    extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
    extra.setdefault("HTTP_X_REQUEST_ID", "same-request-id")
    if key is not None:
        extra["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    factory = RequestFactory()
    if raw is None:
        request = factory.generic(method, path, **extra)
    else:
        request = factory.generic(method, path, raw, content_type=content_type or "", **extra)
        if content_type is None:
            del request.META["CONTENT_TYPE"]
    response = view(request)
    if hasattr(response, "render"):
        response.render()
    assert response["X-Request-Id"] == "same-request-id"
    shown = {name: response[name] for name in HEADERS if response.has_header(name)}
    return response.status_code, shown, json.loads(response.content) if response.content else None


def both(view_class: Any, path: str, body: Any = None, *, raw: bytes | None = None,
         content_type: str | None = MEDIA_TYPE, key: str | None = None, method: str = "POST",
         **headers: str) -> tuple[Any, Any]:
    """(lean answer, DRF answer) to the same request: (status, headers, decoded body) each."""
    if raw is None and body is not None:
        raw = json.dumps(body).encode()
    common = {"path": path, "raw": raw, "content_type": content_type, "key": key, "headers": headers,
              "method": method}
    return _answer(LeanPost(view_class), **common), _answer(view_class.as_view(), **common)


def _same(lean: Any, drf: Any) -> None:
    assert lean == drf


def _push(key: str, **fields: Any) -> str:
    status, _, body = _answer(LeanPost(jobs.PushView), path="/ojs/v1/jobs", raw=json.dumps(
        {"type": "lean.test", "args": [], **fields}).encode(), content_type=MEDIA_TYPE, key=key, headers={},
        method="POST")
    assert status == 201, body
    return body["job"]["id"]


DEEP = {"type": "a", "args": [json.loads("[" * 100 + "]" * 100)]}

# (name, body or raw bytes, content type, headers): every class of error the three endpoints give.
ERRORS = [
    ("invalid JSON", b"{ nope }", MEDIA_TYPE, {}),
    ("not an object", b"[1, 2]", MEDIA_TYPE, {}),
    ("a JSON string", b'"text"', MEDIA_TYPE, {}),
    ("not UTF-8", b'{"type": "\xff"}', MEDIA_TYPE, {}),
    ("NaN", b'{"type": "a", "args": [NaN]}', MEDIA_TYPE, {}),
    ("too large a number", b'{"type": "a", "args": [1e999]}', MEDIA_TYPE, {}),
    ("a NUL", b'{"type": "a", "args": ["\\u0000"]}', MEDIA_TYPE, {}),
    ("an unpaired surrogate", b'{"type": "a", "args": ["\\ud800"]}', MEDIA_TYPE, {}),
    ("too deep", json.dumps(DEEP).encode(), MEDIA_TYPE, {}),
    ("unsupported media type", b'{"type": "a", "args": []}', "text/plain", {}),
    ("no media type", b'{"type": "a", "args": []}', None, {}),
    ("an overlong media type", b'{"type": "a", "args": []}', "application/json; x=" + "y" * 300, {}),
    ("unsupported OJS-Version", b'{"type": "a", "args": []}', MEDIA_TYPE, {"OJS-Version": "2.0"}),
    ("empty body", b"", MEDIA_TYPE, {}),
    ("fields of the wrong type", b'{"type": 5, "queues": 5, "job_id": 5, "args": 5}', MEDIA_TYPE, {}),
]
ENDPOINTS = [
    (jobs.PushView, "/ojs/v1/jobs"),
    (workers.FetchView, "/ojs/v1/workers/fetch"),
    (workers.AckView, "/ojs/v1/workers/ack"),
    (workers.BatchAckView, "/ojs/v1/workers/ack/batch"),
]


@pytest.mark.parametrize(("view_class", "path"), ENDPOINTS, ids=["push", "fetch", "ack", "ack-batch"])
@pytest.mark.parametrize(("case", "raw", "content_type", "headers"), ERRORS, ids=[e[0] for e in ERRORS])
def test_each_error_is_the_same_on_both_paths(keys, view_class, path, case, raw, content_type, headers):
    lean, drf = both(view_class, path, raw=raw, content_type=content_type, key=keys["admin"], **headers)
    assert 400 <= lean[0] < 500, lean
    assert lean[2]["error"]["request_id"] == "same-request-id"
    _same(lean, drf)
    assert not Job.objects.exists()


@pytest.mark.parametrize(("view_class", "path"), ENDPOINTS, ids=["push", "fetch", "ack", "ack-batch"])
@pytest.mark.parametrize("who", ["no key", "bad scheme", "unknown key", "wrong scope", "read scope"])
def test_auth_errors_are_the_same_on_both_paths(keys, view_class, path, who):
    wrong = "worker" if view_class is jobs.PushView else "enqueue"
    key = {"no key": None, "unknown key": "ojs_not_a_key", "wrong scope": keys[wrong],
           "read scope": keys["read"], "bad scheme": None}[who]
    headers = {"Authorization": "Basic dXNlcjpwYXNz"} if who == "bad scheme" else {}
    lean, drf = both(view_class, path, {"type": "a", "args": [], "queues": ["default"], "job_id": UNKNOWN},
                     key=key, **headers)
    assert lean[0] in (401, 403)
    if lean[0] == 401:
        assert lean[1]["WWW-Authenticate"] == 'Bearer realm="ojs"'
    _same(lean, drf)
    assert not Job.objects.exists()


def test_a_body_over_the_limit_is_the_same_413(keys, settings):
    settings.OJS = {**getattr(settings, "OJS", {}), "MAX_ENVELOPE_BYTES": 1024, "MAX_BATCH_BYTES": 1024}
    for view_class, path in ENDPOINTS:
        lean, drf = both(view_class, path, {"type": "a", "args": ["x" * 2000]}, key=keys["admin"])
        assert lean[0] == 413 and lean[2]["error"]["details"] == {"max_size": 1024}
        _same(lean, drf)


def test_a_nul_in_the_query_string_is_the_same_400(keys):
    for view_class, path in ENDPOINTS:
        lean, drf = both(view_class, path + "?x=%00", {"type": "a", "args": []}, key=keys["admin"])
        assert lean[0] == 400
        _same(lean, drf)


@pytest.mark.parametrize("accept", ["application/json", "text/html", "*/*", "application/xml", "nonsense/;;"])
@pytest.mark.parametrize("content_type", [MEDIA_TYPE, "application/json", "application/json; charset=utf-8"])
def test_a_push_is_the_same_whatever_the_accept_and_json_media_type(keys, accept, content_type):
    lean, drf = both(jobs.PushView, "/ojs/v1/jobs", {"type": "a", "args": [1]}, content_type=content_type,
                     key=keys["enqueue"], Accept=accept)
    assert lean[0] == drf[0] == 201
    assert lean[1]["Content-Type"] == MEDIA_TYPE and lean[1]["Allow"] == "POST, OPTIONS"
    assert set(lean[1]) == set(drf[1])
    assert lean[1]["Location"] == f"/ojs/v1/jobs/{lean[2]['job']['id']}"

    def without_ids(body):
        return {name: value for name, value in body["job"].items() if name not in PER_JOB}

    assert without_ids(lean[2]) == without_ids(drf[2]) and set(lean[2]) == set(drf[2]) == {"job"}


def test_a_duplicate_push_is_the_same_409(keys):
    job_id = _push(keys["enqueue"])
    lean, drf = both(jobs.PushView, "/ojs/v1/jobs", {"type": "a", "args": [], "id": job_id}, key=keys["enqueue"])
    assert lean[0] == 409 and lean[2]["error"]["code"] == "duplicate"
    _same(lean, drf)


@pytest.mark.parametrize(("on_conflict", "status"), [("reject", 409), ("ignore", 200)])
def test_a_unique_job_pushed_again_is_the_same_on_both_paths(keys, on_conflict, status):
    options = {"options": {"unique": {"keys": ["type", "args"], "on_conflict": on_conflict}}}
    first = _push(keys["enqueue"], args=[7], **options)
    lean, drf = both(jobs.PushView, "/ojs/v1/jobs", {"type": "lean.test", "args": [7], **options},
                     key=keys["enqueue"])
    assert lean[0] == status, lean
    if status == 200:
        assert lean[2]["job"]["id"] == first and lean[2]["deduplicated"] is True
    _same(lean, drf)


def test_fetch_and_ack_are_the_same_on_both_paths(keys):
    worker = keys["worker"]
    lean, drf = both(workers.FetchView, "/ojs/v1/workers/fetch", {"queues": ["default"], "worker_id": "w"},
                     key=worker)
    assert lean == drf and lean[0] == 200 and lean[2] == {"jobs": []}

    first, second = _push(keys["enqueue"], args=[1]), _push(keys["enqueue"], args=[1])
    lean, drf = both(workers.FetchView, "/ojs/v1/workers/fetch", {"queues": ["default"], "worker_id": "w"},
                     key=worker)
    assert [lean[2]["job"]["id"], drf[2]["job"]["id"]] == [first, second]
    assert lean[1] == drf[1]
    fetched = {name: value for name, value in lean[2]["job"].items() if name not in PER_JOB | {"started_at",
               "visibility_deadline", "deadline_at"}}
    assert fetched == {name: drf[2]["job"][name] for name in fetched}
    assert set(lean[2]["job"]) == set(drf[2]["job"])

    lean = _answer(LeanPost(workers.AckView), path="/ojs/v1/workers/ack", raw=json.dumps(
        {"job_id": first, "worker_id": "w", "result": {"ok": 1}}).encode(), content_type=MEDIA_TYPE, key=worker,
        headers={}, method="POST")
    drf = _answer(workers.AckView.as_view(), path="/ojs/v1/workers/ack", raw=json.dumps(
        {"job_id": second, "worker_id": "w", "result": {"ok": 1}}).encode(), content_type=MEDIA_TYPE, key=worker,
        headers={}, method="POST")
    assert lean[0] == drf[0] == 200 and lean[1] == drf[1]
    assert set(lean[2]) == set(drf[2]) and lean[2]["job"]["result"] == drf[2]["job"]["result"] == {"ok": 1}
    assert (lean[2]["job_id"], drf[2]["job_id"]) == (first, second)

    # Acked again: the same 409 naming the state; an unknown job: the same 404.
    for job_id, status in ((first, 409), (UNKNOWN, 404), ("not-a-uuid", 400)):
        lean, drf = both(workers.AckView, "/ojs/v1/workers/ack", {"job_id": job_id}, key=worker)
        assert lean[0] == status, lean
        _same(lean, drf)


def test_a_batch_ack_carrying_a_fetch_is_the_same_on_both_paths(keys):
    worker = keys["worker"]
    held = [_push(keys["enqueue"], args=[n]) for n in range(2)]
    waiting = [_push(keys["enqueue"], args=[n]) for n in range(2)]
    lean, drf = both(workers.FetchView, "/ojs/v1/workers/fetch", {"queues": ["default"], "worker_id": "w"},
                     key=worker)
    assert [lean[2]["job"]["id"], drf[2]["job"]["id"]] == held
    lean, drf = both(workers.BatchAckView, "/ojs/v1/workers/ack/batch", {
        "acks": [{"job_id": job_id, "worker_id": "w"} for job_id in held],
        "fetch": {"queues": ["default"], "worker_id": "w"}}, key=worker)
    assert lean[0] == drf[0] == 200 and lean[1] == drf[1]
    # The first path completes both held jobs and claims one; the second finds them completed.
    assert ([r["acknowledged"] for r in lean[2]["results"]], [r["acknowledged"] for r in drf[2]["results"]]) == (
        [True, True], [False, False])
    assert [lean[2]["jobs"][0]["id"], drf[2]["jobs"][0]["id"]] == waiting
    assert set(lean[2]["jobs"][0]) == set(drf[2]["jobs"][0])


def test_open_mode_serves_without_a_key_on_both_paths(settings, db):
    settings.OJS = {**getattr(settings, "OJS", {}), "AUTH_REQUIRED": False}
    lean, drf = both(workers.FetchView, "/ojs/v1/workers/fetch", {"queues": ["default"]})
    assert lean == drf and lean[0] == 200


# -- on the wire ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", [path for _, path in ENDPOINTS])
def test_other_methods_are_405_before_credentials_on_the_wire(wire, path):
    for method in ("GET", "PUT", "DELETE", "PATCH"):
        status, headers, body = wire.send(method, path, key=False)
        assert (status, headers["Content-Type"], headers["OJS-Version"]) == (405, MEDIA_TYPE, "1.0"), body
        error = json.loads(body)["error"]
        assert error["code"] == "method_not_allowed" and error["request_id"] == headers["X-Request-Id"]
        assert headers["Allow"] == "POST, OPTIONS"


@pytest.mark.parametrize("accept", ["application/json", "text/html", "*/*", "application/xml"])
def test_every_accept_gets_the_binding_json_on_the_wire(wire, accept):
    status, headers, body = wire.send("POST", "/ojs/v1/jobs", {"type": "a", "args": []}, headers={"Accept": accept})
    assert (status, headers["Content-Type"]) == (201, MEDIA_TYPE)
    job_id = json.loads(body)["job"]["id"]
    status, headers, body = wire.send("POST", "/ojs/v1/workers/fetch", {"queues": ["default"], "worker_id": "w"},
                                      headers={"Accept": accept})
    assert (status, headers["Content-Type"], json.loads(body)["job"]["id"]) == (200, MEDIA_TYPE, job_id)
    status, headers, body = wire.send("POST", "/ojs/v1/workers/ack", {"job_id": job_id, "worker_id": "w"},
                                      headers={"Accept": accept})
    assert (status, headers["Content-Type"], json.loads(body)["state"]) == (200, MEDIA_TYPE, "completed")


def test_an_oversize_body_is_413_on_the_wire(wire):
    too_big = json.dumps({"type": "a", "args": ["x" * (ojs_settings.MAX_ENVELOPE_BYTES + 10)]}).encode()
    for path in ("/ojs/v1/jobs", "/ojs/v1/workers/fetch", "/ojs/v1/workers/ack"):
        status, headers, body = wire.send("POST", path, raw=too_big)
        assert (status, headers["Content-Type"]) == (413, MEDIA_TYPE), body
        assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert not Job.objects.exists()


def test_a_key_without_the_scope_is_403_on_the_wire(wire):
    _, secret = ApiKey.objects.issue("reader", ["read"])
    for path in ("/ojs/v1/jobs", "/ojs/v1/workers/fetch", "/ojs/v1/workers/ack"):
        request = {"type": "a", "args": [], "queues": ["default"], "job_id": str(uuid.uuid4())}
        status, _, body = _send_with(wire, secret, path, request)
        assert status == 403 and json.loads(body)["error"]["details"]["required_scope"] in ("enqueue", "worker")


def _send_with(wire: Any, secret: str, path: str, body: Any) -> tuple[int, Any, bytes]:
    original = wire.key
    wire.key = secret
    try:
        return wire.send("POST", path, body)
    finally:
        wire.key = original
