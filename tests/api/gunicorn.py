"""The example project served by gunicorn in a subprocess, for the tests on the wire."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conformance.harness import free_port
from tests.helpers import database_url

REPO = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).with_name("gunicorn")
MEDIA_TYPE = "application/openjobspec+json"
# A failure bound for a loaded machine, never a wait.
START_BOUND = 180


class Wire:
    """A client of one running server, with an API key."""

    def __init__(self, port: int, key: str, server: subprocess.Popen | None = None):
        self.port, self.key = port, key
        # gunicorn's master process, for the tests that signal it.
        self.server = server
        self.base = f"http://127.0.0.1:{port}"

    def raw(self, data: bytes, *, timeout: float = 60) -> bytes:
        """Send bytes as they are on a fresh connection; what the server answers before closing it."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(data)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            return answer

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


@contextlib.contextmanager
def serving(key: str, *, workers: int = 1, threads: int = 1, database: str | None = None,
            config: Path | None = None, environment: dict[str, str] | None = None) -> Iterator[Wire]:
    """gunicorn on a free port against the test database (or ``database``, a URL), answering health; yields a client.

    ``environment`` adds variables the example project's settings read (``OJS_PROGRESS_STREAMS``...).

    With ``config`` (a gunicorn configuration file) it runs as that file says,
    with ``workers`` processes; without, ``workers`` x ``threads`` and the rest
    of gunicorn's defaults.
    """
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database or database_url(), "DJANGO_SETTINGS_MODULE": "example_project.settings",
           "OJS_AUTH_REQUIRED": "true", "OJS_TEST_HOOKS": "false", "OJS_LOG_LEVEL": "WARNING", **(environment or {})}
    how = (["--config", str(config), "--workers", str(workers)] if config else
           ["--workers", str(workers), "--threads", str(threads), "--timeout", "60"])
    log = tempfile.TemporaryFile()
    server = subprocess.Popen(
        [str(GUNICORN), *how, "--bind", f"127.0.0.1:{port}", "example_project.wsgi:application"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    client = Wire(port, key, server)
    try:
        deadline = time.monotonic() + START_BOUND
        while True:
            assert server.poll() is None, _tail(log)
            try:
                if client.send("GET", "/ojs/v1/health", key=False)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"gunicorn did not answer within {START_BOUND} s\n" + _tail(log)
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
