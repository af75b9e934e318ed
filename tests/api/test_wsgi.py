"""The binding on the wire: the example project served by gunicorn in a subprocess.

The DRF test client never leaves the process; this proves that headers,
status codes and the media type survive a real WSGI server and socket.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django_ojs.models import ApiKey, Job
from tests.helpers import database_url

REPO = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).with_name("gunicorn")
MEDIA_TYPE = "application/openjobspec+json"


def free_port() -> int:
    for port in range(8300, 8400):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port in 8300-8399")


class Wire:
    def __init__(self, base: str, key: str):
        self.base, self.key = base, key

    def send(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
             headers: dict[str, str] | None = None, key: bool = True):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", MEDIA_TYPE)
        if key:
            request.add_header("Authorization", f"Bearer {self.key}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()


@pytest.fixture
def wire(transactional_db):
    _, key = ApiKey.objects.issue("wire", ["admin"])
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "example_project.settings",
           "OJS_AUTH_REQUIRED": "true", "OJS_TEST_HOOKS": "false", "OJS_LOG_LEVEL": "WARNING"}
    log = tempfile.TemporaryFile()
    server = subprocess.Popen(
        [str(GUNICORN), "--bind", f"127.0.0.1:{port}", "--workers", "1", "--timeout", "60",
         "example_project.wsgi:application"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    client = Wire(f"http://127.0.0.1:{port}", key)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, _tail(log)
            try:
                if client.send("GET", "/ojs/v1/health", key=False)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "gunicorn did not answer within 60 s\n" + _tail(log)
            time.sleep(0.1)
        yield client
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)
        log.close()


def _tail(log) -> str:
    log.seek(0)
    return log.read()[-3000:].decode(errors="replace")


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
