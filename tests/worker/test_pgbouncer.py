"""Scale-out behind PgBouncer in transaction mode: workers and the HTTP API through the pooler.

A PgBouncer of the test's own (Debian's ``pgbouncer``; skipped without it,
failed without it in CI) pools the test database in transaction mode: each
transaction may run on another server connection. Real ``ojs_worker``
processes and a real gunicorn serve through it and complete every job
exactly once. What needs a session of its own is routed around the pooler:
one worker LISTENs on a direct connection (``OJS["LISTEN"]`` = an alias),
the other does not listen at all (``False``) and polls. Server-side
prepared statements stay off (the database sets Django's
``DISABLE_SERVER_SIDE_CURSORS``, which ``core/prepared.py`` obeys): a
statement prepared on one server connection does not exist on the next.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.db.models import Count

from django_ojs.models import ApiKey, Job
from tests.api.gunicorn import serving
from tests.conformance.harness import free_port
from tests.helpers import database_url

from .conftest import PATIENCE, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
# Fewer server connections than clients: the pool is shared, as in production.
POOL_SIZE = 4


class PgBouncer:
    def __init__(self, directory: Path, port: int, log: Path):
        self.directory, self.port, self.log = directory, port, log

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def logins(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def pgbouncer(transactional_db) -> Iterator[PgBouncer]:
    if not os.path.exists(PGBOUNCER):
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed (apt-get install pgbouncer); CI must run this test")
        pytest.skip("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    settings = connection.settings_dict
    # PgBouncer refuses to run as root; as root it runs as postgres, who must read its files.
    directory = Path(tempfile.mkdtemp(prefix="ojs-pgbouncer-"))
    directory.chmod(0o755)
    port = free_port()
    log = directory / "pgbouncer.log"
    users = directory / "users.txt"
    users.write_text('"postgres" ""\n')
    config = directory / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"* = host={settings.get('HOST') or '127.0.0.1'} port={settings.get('PORT') or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {users}\n"
        f"pool_mode = transaction\ndefault_pool_size = {POOL_SIZE}\nmax_client_conn = 200\n"
        f"logfile = {log}\npidfile = {directory / 'pgbouncer.pid'}\n"
        # psycopg sends these at connect; the pooler must not refuse them.
        "ignore_startup_parameters = extra_float_digits,options\n"
    )
    for path in (users, config):
        path.chmod(0o644)
    user: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(directory, owner.pw_uid, owner.pw_gid)  # its log and pid file
        user = ["-u", "postgres"]
    output = (directory / "stderr.txt").open("wb")
    process = subprocess.Popen([PGBOUNCER, *user, str(config)], stdout=output, stderr=subprocess.STDOUT)
    try:
        bouncer = PgBouncer(directory, port, log)

        def up() -> bool:
            assert process.poll() is None, (directory / "stderr.txt").read_text(errors="replace")
            return log.exists() and "process up" in bouncer.logins()

        wait_until(up, PATIENCE, "pgbouncer to start")
        yield bouncer
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
        output.close()
        shutil.rmtree(directory, ignore_errors=True)


def push_over_http(wire, queue: str, count: int) -> None:
    status, _, body = wire.send(
        "POST", "/ojs/v1/jobs/batch",
        {"jobs": [{"type": "probe.record", "args": [], "options": {"queue": queue}} for _ in range(count)]},
    )
    assert status == 201, body


def completed(queue: str) -> int:
    return Job.objects.filter(queue=queue, state="completed").count()


def listening_server_connections(url: str) -> list[list[str]]:
    """The channels each of the pool's server connections listens on, those that listen any: as many
    transactions held open at once through the pooler as it has server connections, so each is
    lent to one of them."""
    sessions = [psycopg.connect(url) for _ in range(POOL_SIZE)]
    try:
        channels = [session.execute("SELECT pg_listening_channels()").fetchall() for session in sessions]
        return [[row[0] for row in rows] for rows in channels if rows]
    finally:
        for session in sessions:
            session.close()


def test_workers_and_the_http_api_complete_every_job_through_pgbouncer_in_transaction_mode(pgbouncer, worker):
    name = connection.settings_dict["NAME"]
    # As docs/how-to/pgbouncer.md says: behind a transaction pooler, Django's
    # DISABLE_SERVER_SIDE_CURSORS (which also keeps prepared statements off).
    pooled = pgbouncer.url(name) + "?disable_server_side_cursors=True"
    _, secret = ApiKey.objects.issue("bouncer", ["admin"])
    with serving(secret, workers=2, threads=2, database=pooled) as wire:
        # An HTTP worker first: PUSH, FETCH and ACK through the pooler.
        push_over_http(wire, "http", 5)
        status, _, body = wire.send("POST", "/ojs/v1/workers/fetch",
                                    {"queues": ["http"], "count": 5, "worker_id": "http-worker"})
        assert status == 200, body
        fetched = [job["id"] for job in json.loads(body)["jobs"]]
        assert len(fetched) == 5
        for job_id in fetched:
            status, _, body = wire.send("POST", "/ojs/v1/workers/ack", {"job_id": job_id, "result": "http"})
            assert status == 200, body
        assert completed("http") == 5

        # Then ojs_worker processes, one per way of waking up, each on a queue of its own.
        listening = worker("--queue", "listened", "--concurrency", "5",
                           env={"DATABASE_URL": pooled, "OJS_LISTEN_DATABASE_URL": database_url()})
        polling = worker("--queue", "polled", "--concurrency", "5", env={"DATABASE_URL": pooled, "OJS_LISTEN": "off"})
        # And one left at the default LISTEN = True: the pooled database is not LISTENed on (a LISTEN there
        # stays on a server connection the pooler lends to others); it polls, and says so.
        defaulted = worker("--queue", "defaulted", "--concurrency", "2", env={"DATABASE_URL": pooled})
        defaulted.wait_for_output(r"no LISTEN there; polling")
        for queue in ("listened", "polled", "defaulted"):
            push_over_http(wire, queue, 100)
        try:
            wait_until(lambda: completed("listened") == completed("polled") == completed("defaulted") == 100,
                       PATIENCE * 3, "every job pushed over HTTP to complete", 0.2)
        except AssertionError as failed:
            states = list(Job.objects.values_list("queue", "state").annotate(n=Count("seq")))
            raise AssertionError(f"{failed}; jobs: {states}\nlistening:\n{listening.output[-3000:]}"
                                 f"\npolling:\n{polling.output[-3000:]}") from None
        # Jobs pushed while both are idle are picked up: by a notification, by the poll.
        for queue in ("listened", "polled"):
            push_over_http(wire, queue, 10)
        wait_until(lambda: completed("listened") == completed("polled") == 110, PATIENCE,
                   "the late jobs to complete", 0.2)
        # A web process's waiter, at the default LISTEN too, waits by polling through the pool.
        push_over_http(wire, "defaulted", 1)
        [waited] = Job.objects.filter(queue="defaulted").exclude(state="completed").values_list("id", flat=True)
        status, _, body = wire.send("GET", f"/ojs/v1/jobs/{waited}/result?wait=true&timeout=30")
        assert status == 200 and json.loads(body)["state"] == "completed", body
        # No server connection of the pool was left listening, by a worker or by the waiter.
        assert listening_server_connections(pgbouncer.url(name)) == []

    assert set(Job.objects.values_list("attempt", flat=True)) == {1}
    # Exactly once: the handlers' own records, one per job the workers ran.
    assert Execution.objects.count() == 321
    assert not Execution.objects.values("job_id").annotate(n=Count("id")).filter(n__gt=1).exists()
    for process in (listening, polling, defaulted):
        assert "Traceback" not in process.output, process.output[-3000:]
    # The pooler carried them: it logged their logins to the test database.
    assert f"db={name}" in pgbouncer.logins(), pgbouncer.logins()[-2000:]
