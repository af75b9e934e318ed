"""The binding on the wire: the example project served by gunicorn in a subprocess.

The DRF test client never leaves the process; this proves that headers,
status codes and the media type survive a real WSGI server and socket.
"""

from __future__ import annotations

import json

from django_ojs.models import Event, Job, Queue

MEDIA_TYPE = "application/openjobspec+json"


def test_push_over_the_wire_carries_the_binding_headers(wire):
    status, headers, body = wire.send("POST", "/ojs/v1/jobs", {"type": "email.send", "args": ["a"]},
                                      headers={"X-Request-Id": "trace-123"})
    assert status == 201
    assert headers["Content-Type"] == MEDIA_TYPE
    assert headers["OJS-Version"] == "1.0"
    assert headers["X-Request-Id"] == "trace-123"
    job = json.loads(body)["job"]
    assert headers["Location"] == f"/ojs/v1/jobs/{job['id']}"
    assert Job.objects.get(id=job["id"]).state == "available"


def test_errors_over_the_wire_are_ojs_error_bodies(wire):
    status, headers, body = wire.send("POST", "/ojs/v1/jobs", raw=b"{ invalid json }")
    assert (status, headers["Content-Type"], headers["OJS-Version"]) == (400, MEDIA_TYPE, "1.0")
    error = json.loads(body)["error"]
    assert error["code"] == "invalid_payload" and error["request_id"] == headers["X-Request-Id"]

    status, headers, body = wire.send("GET", "/ojs/v1/no/such/path")
    assert (status, headers["Content-Type"], json.loads(body)["error"]["code"]) == (404, MEDIA_TYPE, "not_found")
    assert headers["X-Request-Id"].startswith("req_")

    status, headers, body = wire.send("GET", "/ojs/v1/queues", key=False)
    assert (status, headers["WWW-Authenticate"], headers["Content-Type"]) == (401, 'Bearer realm="ojs"', MEDIA_TYPE)

    status, headers, _ = wire.send("POST", "/ojs/v1/jobs", raw=b'{"type": "a", "args": []}',
                                   headers={"Content-Type": "text/plain"})
    assert (status, headers["Content-Type"]) == (400, MEDIA_TYPE)


def test_a_worker_round_trip_over_the_wire(wire):
    _, _, body = wire.send("POST", "/ojs/v1/jobs", {"type": "a", "args": [1]})
    job_id = json.loads(body)["job"]["id"]
    status, _, body = wire.send("POST", "/ojs/v1/workers/fetch", {"queues": ["default"], "worker_id": "w1"})
    assert (status, json.loads(body)["jobs"][0]["id"]) == (200, job_id)
    status, _, body = wire.send("POST", "/ojs/v1/workers/ack", {"job_id": job_id, "worker_id": "w1", "result": 2})
    assert (status, json.loads(body)["state"]) == (200, "completed")
    status, _, body = wire.send("POST", "/ojs/v1/workers/ack", {"job_id": job_id})
    assert (status, json.loads(body)["error"]["details"]["current_state"]) == (409, "completed")


def _error_response(status: int, headers, body: bytes) -> dict:
    assert (headers["Content-Type"], headers["OJS-Version"]) == (MEDIA_TYPE, "1.0"), (status, body[:300])
    error = json.loads(body)["error"]
    assert error["request_id"] == headers["X-Request-Id"]
    return error


def test_every_unknown_path_under_ojs_gets_the_error_body(wire):
    # "%0A" once slipped past the catch-all route to Django's HTML 404.
    for path in ["/ojs/v1/no%0Asuch", "/ojs/%0A", "/ojs/v1/jobs%0A", "/ojs/v1/%0A/x", "/ojs/v1/%FF%FE",
                 "/ojs/v1/%00", "/ojs/v1/jobs/a/b/c", "/ojs/%0D%0Ax", "/ojs/v1/queues%0A/stats"]:
        for method in ("GET", "POST", "DELETE"):
            status, headers, body = wire.send(method, path, {} if method == "POST" else None)
            assert (status, _error_response(status, headers, body)["code"]) == (404, "not_found"), (method, path)


ACCEPTS = [None, "*/*", "application/json", "text/plain", "text/html", "application/xml", "image/*",
           "garbage;;;q=x", "text/html;q=0.9, application/json;q=0.8, */*;q=0.1", MEDIA_TYPE,
           "application/openjobspec+protobuf"]


def test_every_accept_header_is_served_in_the_binding_media_type(wire):
    """ojs-http-binding §4.3: the server answers in its media type whatever the Accept."""
    for accept in ACCEPTS:
        headers = {"Accept": accept} if accept else {}
        status, got, body = wire.send("POST", "/ojs/v1/jobs", {"type": "a", "args": [accept]}, headers=headers)
        assert (status, got["Content-Type"]) == (201, MEDIA_TYPE), (accept, body[:300])
        job_id = json.loads(body)["job"]["id"]
        status, got, body = wire.send("GET", f"/ojs/v1/jobs/{job_id}?format=api", headers=headers)
        assert (status, got["Content-Type"], json.loads(body)["job"]["args"]) == (200, MEDIA_TYPE, [accept])
        status, got, body = wire.send("GET", "/ojs/v1/jobs/not-a-uuid", headers=headers)
        assert (status, _error_response(status, got, body)["code"]) == (400, "invalid_request"), accept
        status, got, body = wire.send("GET", "/ojs/v1/health", headers=headers, key=False)
        assert (status, got["Content-Type"]) == (200, MEDIA_TYPE), accept
    assert Job.objects.count() == len(ACCEPTS)


def _announce(method: str, path: str, length: int, *, key: str | None = None) -> bytes:
    """Request headers announcing a body of ``length`` bytes, none of which follows."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {MEDIA_TYPE}",
             f"Content-Length: {length}"]
    if key:
        lines.append(f"Authorization: Bearer {key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _parse_raw(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def test_a_method_no_view_serves_is_refused_before_the_body_arrives(wire):
    """A slow client announcing a large body must not hold a server thread where nothing reads it.

    The body never comes: the server answers from the headers alone (before,
    it waited for all 10 MB, for as long as the client cared to take).
    """
    for path, key in [("/ojs/v1/health", None), ("/ojs/manifest", None), ("/ojs/v1/queues", wire.key),
                      ("/ojs/v1/queues", None), ("/ojs/v1/queues/default/stats", wire.key)]:
        status, headers, body = _parse_raw(wire.raw(_announce("POST", path, 10_000_000, key=key)))
        assert status == 405, (path, body[:300])
        assert headers["content-type"] == MEDIA_TYPE and "POST" not in headers["allow"]
        assert json.loads(body)["error"]["code"] == "method_not_allowed"


def test_get_head_and_delete_do_not_wait_for_an_announced_body(wire):
    _, _, body = wire.send("POST", "/ojs/v1/jobs", {"type": "a", "args": []})
    job_id = json.loads(body)["job"]["id"]
    for method, path, expected in [("GET", "/ojs/v1/queues", 200), ("HEAD", "/ojs/v1/queues", 200),
                                   ("GET", "/ojs/v1/health", 200),
                                   ("GET", f"/ojs/v1/jobs/{job_id}", 200), ("DELETE", f"/ojs/v1/jobs/{job_id}", 200),
                                   ("GET", "/ojs/v1/no/such/path", 404)]:
        status, headers, body = _parse_raw(wire.raw(_announce(method, path, 10_000_000, key=wire.key)))
        assert status == expected, (method, path, body[:300])
        assert headers["content-type"] == MEDIA_TYPE
    assert Job.objects.get(id=job_id).state == "cancelled"


def _chunked(method: str, path: str, body: dict, *, key: str) -> bytes:
    """A request whose body comes in chunks (Transfer-Encoding), with no Content-Length."""
    data = json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {MEDIA_TYPE}",
             "Transfer-Encoding: chunked", f"Authorization: Bearer {key}", "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n\r\n"


def test_a_body_sent_in_chunks_is_refused_with_411_and_changes_nothing(wire):
    """Django reads a body by its Content-Length: a chunked one was taken as empty, and a PUT of a
    queue's configuration answered 200 having changed nothing but its update time."""
    wire.send("PUT", "/ojs/v1/admin/queues/mail/config", {"concurrency": 7})
    before = (Queue.objects.get(name="mail").updated_at, Event.objects.count(), Job.objects.count())
    for method, path, body in [("PUT", "/ojs/v1/admin/queues/mail/config", {"concurrency": 42}),
                               ("POST", "/ojs/v1/jobs", {"type": "a", "args": []}),
                               ("POST", "/ojs/v1/workers/ack/batch", {"acks": [{"job_id": "x"}]})]:
        status, headers, answer = _parse_raw(wire.raw(_chunked(method, path, body, key=wire.key)))
        assert status == 411, (method, path, answer[:300])
        assert headers["content-type"] == MEDIA_TYPE
        assert "Content-Length" in json.loads(answer)["error"]["message"]
    assert Queue.objects.get(name="mail").concurrency == 7
    assert (Queue.objects.get(name="mail").updated_at, Event.objects.count(), Job.objects.count()) == before
