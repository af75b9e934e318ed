"""A pooled keep-alive client through real gunicorn, across the keep-alive boundary.

The OJS Python SDK talks through httpx, which keeps an idle connection in its
pool for 5 s and sends the next request on it. gunicorn's own keep-alive is
2 s: between 2 and 5 s of quiet the server has closed a connection the client
still means to use, and a request sent on it as it closes gets a reset
(``ReadError``) for a request the server never read. httpx looks at an idle
connection before reusing it, which narrows that race to the moment between
its look and the request's arrival, so the SDK failed 1 to 3 runs in 10 of a
200-job round trip, not every run.

The client here keeps its connections as httpx does (5 s), without that
look: every reuse of a connection the server has closed fails, and the race
becomes a certainty. Twenty round trips (PUSH, FETCH, ACK on one pooled
connection each, side by side) wait before their FETCH and their ACK for idle
gaps just under, at and just over gunicorn's default keep-alive (2 s) and
the client's pool expiry (5 s). Served with ``example_project/gunicorn.conf.py``
(keep-alive 75 s) every request is answered and every job completes; served
with gunicorn's default keep-alive the same client sees connection errors,
which is what the second case asserts.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

from django_ojs.models import ApiKey, Job
from tests.api.gunicorn import MEDIA_TYPE, REPO, Wire, serving

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CONFIG = REPO / "example_project" / "gunicorn.conf.py"
ROUNDS = 20
# Seconds of quiet before a round's FETCH and before its ACK.
GUNICORN_DEFAULT_KEEPALIVE = 2.0
HTTPX_POOL_EXPIRY = 5.0
GAPS = tuple(
    boundary + offset
    for boundary in (GUNICORN_DEFAULT_KEEPALIVE, HTTPX_POOL_EXPIRY)
    for offset in (-0.1, 0.0, 0.1)
)
# Errors a client sees when it sends on a connection the server closed.
CONNECTION_ERRORS = (ConnectionError, http.client.HTTPException, TimeoutError)


@dataclass
class KeepAlivePool:
    """Connections to one server, reused while idle for at most ``expiry`` seconds (httpx's default).

    Unlike httpx it does not look whether the server closed an idle
    connection before reusing it (see the module's docstring).
    """

    port: int
    expiry: float = HTTPX_POOL_EXPIRY
    idle: list[tuple[http.client.HTTPConnection, float]] = field(default_factory=list)
    reused: int = 0

    def request(self, method: str, path: str, body: object, key: str) -> tuple[int, dict]:
        connection = self._take()
        headers = {"Content-Type": MEDIA_TYPE, "Authorization": f"Bearer {key}"}
        try:
            connection.request(method, path, body=json.dumps(body), headers=headers)
            response = connection.getresponse()
            answer = response.read()
        except BaseException:
            connection.close()
            raise
        if response.will_close:
            connection.close()
        else:
            self.idle.append((connection, time.monotonic()))
        return response.status, json.loads(answer)

    def _take(self) -> http.client.HTTPConnection:
        while self.idle:
            connection, since = self.idle.pop()
            if time.monotonic() - since <= self.expiry:
                self.reused += 1
                return connection
            connection.close()
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def close(self) -> None:
        for connection, _ in self.idle:
            connection.close()


@dataclass
class Outcome:
    completed: int = 0
    # Requests sent on a connection kept from an earlier one.
    reused: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def gaps_of(index: int) -> tuple[float, float]:
    """The idle seconds before round ``index``'s FETCH and before its ACK: every gap in turn."""
    return GAPS[index % len(GAPS)], GAPS[(index + 3) % len(GAPS)]


def round_trip(wire: Wire, index: int, outcome: Outcome) -> None:
    """PUSH a job, wait, FETCH it, wait, ACK it: one connection, two idle gaps."""
    pool = KeepAlivePool(wire.port)
    queue = f"keepalive-{index}"
    before_fetch, before_ack = gaps_of(index)
    steps = [
        (0.0, "/ojs/v1/jobs", {"type": "keepalive.probe", "args": [index], "options": {"queue": queue}}),
        (before_fetch, "/ojs/v1/workers/fetch", {"queues": [queue], "worker_id": queue}),
        (before_ack, "/ojs/v1/workers/ack", None),
    ]
    job_id = None
    try:
        for gap, path, body in steps:
            time.sleep(gap)
            try:
                status, answer = pool.request("POST", path, body or {"job_id": job_id}, wire.key)
            except CONNECTION_ERRORS as error:
                outcome.fail(f"round {index}, {path} after {gap} s idle: {type(error).__name__}: {error}")
                return
            if status >= 300:
                outcome.fail(f"round {index}, {path}: {status} {answer}")
                return
            if path.endswith("/fetch"):
                job_id = answer["jobs"][0]["id"]
        with outcome.lock:
            outcome.completed += 1
    finally:
        with outcome.lock:
            outcome.reused += pool.reused
        pool.close()


def run_rounds(wire: Wire) -> Outcome:
    outcome = Outcome()
    threads = [threading.Thread(target=round_trip, args=(wire, index, outcome)) for index in range(ROUNDS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return outcome


@pytest.mark.parametrize(
    ("config", "served_as"),
    [
        pytest.param(CONFIG, "example_project/gunicorn.conf.py", id="the-production-config"),
        pytest.param(None, "gunicorn's default keep-alive (2 s)", id="gunicorn-defaults"),
    ],
)
def test_a_pooled_client_keeps_its_connections_across_idle_gaps(transactional_db, config: Path | None, served_as: str):
    _, key = ApiKey.objects.issue("keep-alive", ["admin"])
    # Two processes of four threads: the gthread worker, which keeps connections alive.
    with serving(key, workers=2, threads=4, config=config) as wire:
        outcome = run_rounds(wire)

    if config is None:
        # The failure the configuration is there to prevent: seen, not guessed.
        assert outcome.errors, f"served with {served_as}, no request met a closed connection"
        assert any("after 4.9 s idle" in error or "after 5.0 s idle" in error for error in outcome.errors)
        return
    assert outcome.errors == [], f"served with {served_as}:\n" + "\n".join(outcome.errors)
    assert outcome.completed == ROUNDS
    # Kept alive, not closed after each response: every gap shorter than the
    # pool's expiry reused its connection.
    within_expiry = sum(gap < HTTPX_POOL_EXPIRY for index in range(ROUNDS) for gap in gaps_of(index))
    assert outcome.reused >= within_expiry
    assert Job.objects.filter(type="keepalive.probe", state="completed").count() == ROUNDS


def test_the_production_config_reads_the_longest_search_the_admin_api_takes(transactional_db):
    """A search of 1,000 characters, each 6 bytes percent-encoded: past gunicorn's default request
    line (4094 bytes), which gunicorn refuses itself in HTML; within the config's, an API answer."""
    _, key = ApiKey.objects.issue("long-lines", ["admin"])
    with serving(key, workers=1, config=CONFIG) as wire:
        status, headers, body = wire.send("GET", "/ojs/v1/admin/jobs?search=" + quote("é" * 999 + "x"))
    assert len(quote("é" * 999 + "x")) > 4094
    assert (status, headers["Content-Type"]) == (200, "application/openjobspec+json"), body[:300]
