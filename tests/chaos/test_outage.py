"""PostgreSQL down for ten seconds under a running API, worker and reaper (docs/explanation/reliability.md).

One scenario, run once for the module (``outage``), on a throwaway cluster
with real processes: gunicorn, ``ojs_worker``, ``ojs_reaper``.

1. Five jobs of three seconds start, and on a worker of its own queue
   ("quitter", grace period 2 s) two jobs of a minute; then the cluster is
   stopped (fast).
2. During the outage: PUSH, INFO (whose API key lookup needs the database)
   and health are called; the quitter is sent SIGTERM; a second worker and
   a second reaper are started.
3. After ten seconds the cluster starts again. The first worker and reaper
   are stopped, and new jobs (one of them scheduled) must be run by the
   worker and promoted by the reaper that were started during the outage.

The tests then check what each part promised. Waits on what the system
under test must do end the scenario's step, not the scenario (``observed``):
each test then fails with its own evidence.
"""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.throwaway_postgres import ThrowawayCluster, cluster_for_tests, free_port
from tests.waiting import WaitTimeout, wait_until

from .plan import QUEUE, timing_environment
from .processes import Fleet, Managed

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.chaos]

OUTAGE_SECONDS = 10.0
JOB_SECONDS = 3.0
MEDIA_TYPE = "application/openjobspec+json"
QUITTER_QUEUE = "drain"
QUITTER_GRACE = 2.0
# The parts of a running worker that use the database on their own.
FIRST_WORKER_COMPONENTS = ("worker", "heartbeat", "listener")


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


def call(base: str, method: str, path: str, key: str | None, body: Any = None) -> Reply:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", MEDIA_TYPE)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, headers, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, headers, raw = error.code, error.headers, error.read()
    return Reply(status, dict(headers), json.loads(raw) if raw else None)


def job(kind: str, index: int, seconds: float = 0.0, queue: str = QUEUE, **top: Any) -> dict[str, Any]:
    return {"type": f"chaos.{kind}", "args": [kind, index, seconds], "options": {"queue": queue}, **top}


@dataclass
class Outage:
    stopped_at: float
    back_at: float
    during: dict[str, Reply]
    after: Reply
    # The five jobs that were running when the database went away.
    running: list[str]
    jobs: dict[str, tuple[str, int]]  # id -> (state, attempt)
    executions: dict[str, list[tuple[int, int, float | None]]]  # id -> [(attempt, pid, finished_at)]
    errors: int  # in the history of the chaos queue's jobs
    deaths: int  # workers declared dead, the quitter aside
    first_worker: Managed
    first_reaper: Managed
    late_worker: Managed
    late_reaper: Managed
    api: Managed
    # Sent SIGTERM during the outage with jobs that outlast its grace period; when it exited.
    quitter: Managed
    quitter_exited_at: float | None
    # Jobs pushed after the outage, with only the late worker and reaper left.
    later: list[str]
    exits: dict[str, int | None] = field(default_factory=dict)
    # What the scenario waited for, and whether it happened in time.
    observed: dict[str, bool] = field(default_factory=dict)


@pytest.fixture(scope="module")
def outage(tmp_path_factory) -> Outage:
    with cluster_for_tests() as cluster:
        fleet = Fleet(
            cluster.create_database("ojs_outage"), tmp_path_factory.mktemp("outage"), env=timing_environment()
        )
        try:
            return _scenario(cluster, fleet)
        finally:
            fleet.close()


def _scenario(cluster: ThrowawayCluster, fleet: Fleet) -> Outage:
    fleet.run("migrate", "--run-syncdb", "--verbosity", "0")
    key = fleet.run("ojs_create_api_key", "outage", "--scope", "admin", "--quiet").split()[-1]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api = fleet.gunicorn(port)
    wait_until(lambda: _health(base) == 200, 60, "gunicorn to serve /ojs/v1/health")
    first_reaper = fleet.manage("reaper", "ojs_reaper")
    first_worker = fleet.manage("worker", "ojs_worker", "--queue", QUEUE, "--concurrency", "8")
    quitter = fleet.manage(
        "worker",
        "ojs_worker",
        "--queue",
        QUITTER_QUEUE,
        "--concurrency",
        "2",
        "--grace-period",
        str(QUITTER_GRACE),
    )
    wait_until(lambda: first_worker.worker_id and quitter.worker_id, 60, "the first workers to register")

    started = "SELECT count(*) FROM ojs_chaos_execution"
    for i in range(2):
        call(base, "POST", "/ojs/v1/jobs", key, job("slow", 300 + i, 60.0, queue=QUITTER_QUEUE))
    wait_until(lambda: _count(cluster, started) == 2, 30, "the quitter's jobs to start")
    running = [
        call(base, "POST", "/ojs/v1/jobs", key, job("slow", i, JOB_SECONDS)).body["job"]["id"]
        for i in range(5)
    ]
    wait_until(lambda: _count(cluster, started) == 7, 30, "the five jobs to start")

    cluster.stop("fast")
    stopped_at = time.time()
    quitter.send(signal.SIGTERM)
    during = {
        "push": call(base, "POST", "/ojs/v1/jobs", key, job("quick", 100)),
        "info": call(base, "GET", f"/ojs/v1/jobs/{running[0]}", key),
        "health": call(base, "GET", "/ojs/v1/health", None),
    }
    late_worker = fleet.manage("worker", "ojs_worker", "--queue", QUEUE, "--concurrency", "8")
    late_reaper = fleet.manage("reaper", "ojs_reaper")
    observed = {}
    for process, component in ((late_worker, "worker"), (late_reaper, "reaper")):
        observed[f"{process.label} waits"] = (
            _observed(lambda p=process, c=component: _noticed(p, c) or not p.alive(), 60) and process.alive()
        )
    _observed(lambda: not quitter.alive(), max(0.0, stopped_at + OUTAGE_SECONDS - time.time()))
    quitter_exited_at = None if quitter.alive() else time.time()
    time.sleep(max(0.0, stopped_at + OUTAGE_SECONDS - time.time()))  # the outage itself
    cluster.start()
    back_at = time.time()

    completed = "SELECT count(*) FROM django_ojs_job WHERE state = 'completed'"
    observed["results written"] = _observed(lambda: _count(cluster, completed) == 5, 60)
    observed["late worker registered"] = _observed(
        lambda: late_worker.worker_id or not late_worker.alive(), 60
    )
    observed["first worker and reaper saw the end"] = _observed(
        lambda: (
            all(_lines(first_worker, component, "available again") for component in FIRST_WORKER_COMPONENTS)
            and _lines(first_reaper, "reaper", "available again")
        ),
        30,
    )
    exits: dict[str, int | None] = {}
    for process in (first_worker, first_reaper):
        exits[process.label] = _stop(process)

    after = call(base, "POST", "/ojs/v1/jobs", key, job("quick", 200))
    pushed = [after] + [call(base, "POST", "/ojs/v1/jobs", key, job("quick", 201 + i)) for i in range(2)]
    pushed.append(call(base, "POST", "/ojs/v1/jobs", key, job("quick", 210, scheduled_at="+PT1S")))
    later = [reply.body["job"]["id"] for reply in pushed if reply.status == 201]
    observed["later jobs run"] = _observed(lambda: _count(cluster, completed) == 5 + len(pushed), 60)
    for process in (late_worker, late_reaper, api, quitter):
        exits[process.label] = _stop(process)

    with cluster.connect("ojs_outage") as conn:
        jobs = {
            str(id_): (state, attempt)
            for id_, state, attempt in conn.execute("SELECT id, state, attempt FROM django_ojs_job")
        }
        executions: dict[str, list[tuple[int, int, float | None]]] = {}
        for job_id, attempt, pid, finished in conn.execute(
            "SELECT job_id, attempt, pid, finished_at FROM ojs_chaos_execution"
        ):
            executions.setdefault(str(job_id), []).append(
                (attempt, pid, finished.timestamp() if finished else None)
            )
        errors = conn.execute(
            "SELECT count(*) FROM django_ojs_joberror e JOIN django_ojs_job j ON j.seq = e.job_id "
            "WHERE j.queue = %s",
            [QUEUE],
        ).fetchone()[0]
        deaths = conn.execute(
            "SELECT count(*) FROM django_ojs_event WHERE type = 'worker.stopped' "
            "AND data->>'reason' = 'dead' AND data->>'worker_id' <> %s",
            [quitter.worker_id],
        ).fetchone()[0]
    return Outage(
        stopped_at,
        back_at,
        during,
        after,
        running,
        jobs,
        executions,
        errors,
        deaths,
        first_worker,
        first_reaper,
        late_worker,
        late_reaper,
        api,
        quitter,
        quitter_exited_at,
        later,
        exits,
        observed,
    )


def _observed(condition: Any, timeout: float) -> bool:
    try:
        return bool(wait_until(condition, timeout, "the scenario's step"))
    except WaitTimeout:
        return False


def _stop(process: Managed) -> int | None:
    """SIGTERM; the exit status, or None if it did not exit in time."""
    process.send(signal.SIGTERM)
    try:
        return process.wait(60)
    except WaitTimeout:
        return None


def _health(base: str) -> int | None:
    try:
        return call(base, "GET", "/ojs/v1/health", None).status
    except OSError:
        return None


def _count(cluster: ThrowawayCluster, sql: str) -> int:
    with cluster.connect("ojs_outage") as conn:
        return conn.execute(sql).fetchone()[0]


def _lines(process: Managed, component: str, what: str) -> list[str]:
    return re.findall(rf"^.*: {component}: database {what}.*$", process.output(), re.MULTILINE)


def _noticed(process: Managed, component: str) -> bool:
    return bool(_lines(process, component, "unavailable"))


# -- the API -----------------------------------------------------------------------------


@pytest.mark.parametrize("call_name", ["push", "info"])
def test_api_calls_get_503_with_the_error_body_and_retry_after(outage, call_name):
    reply = outage.during[call_name]
    assert reply.status == 503, reply
    assert reply.headers["Retry-After"] == "5"
    assert reply.headers["Content-Type"] == MEDIA_TYPE
    error = reply.body["error"]
    assert (error["code"], error["retryable"]) == ("backend_unavailable", True)
    assert error["details"] == {"retry_after_seconds": 5}
    assert error["request_id"] == reply.headers["X-Request-Id"]
    assert reply.headers["OJS-Version"] == "1.0"


def test_health_is_503_with_retry_after(outage):
    reply = outage.during["health"]
    assert reply.status == 503
    assert reply.headers["Retry-After"] == "5"
    assert (reply.body["status"], reply.body["backend"]["status"]) == ("degraded", "disconnected")


def test_the_api_serves_again_once_the_database_is_back(outage):
    assert outage.after.status == 201, outage.after


# -- the worker's results ----------------------------------------------------------------


def test_results_computed_during_the_outage_are_written_after_it_without_a_rerun(outage):
    assert outage.observed["results written"], outage.jobs
    for job_id in outage.running:
        assert outage.jobs[job_id] == ("completed", 1)
        [(attempt, pid, finished_at)] = outage.executions[job_id]
        assert (attempt, pid) == (1, outage.first_worker.pid)
        assert outage.stopped_at < finished_at < outage.back_at, "the handler returned during the outage"
    assert outage.errors == 0
    assert outage.deaths == 0, "a worker was declared dead because the database was away"


# -- processes started during the outage -------------------------------------------------


def test_a_worker_and_a_reaper_started_during_the_outage_wait_for_it_then_work(outage):
    late = (outage.late_worker, outage.late_reaper)
    assert outage.observed[f"{outage.late_worker.label} waits"], outage.late_worker.output()[-3000:]
    assert outage.observed[f"{outage.late_reaper.label} waits"], outage.late_reaper.output()[-3000:]
    assert outage.observed["later jobs run"], [process.output()[-2000:] for process in late]
    for job_id in outage.later:
        assert outage.jobs[job_id] == ("completed", 1)
        [(_, pid, _)] = outage.executions[job_id]
        assert pid == outage.late_worker.pid
    assert len(outage.later) == 4  # including one scheduled job only the late reaper could promote
    for process in (outage.first_worker, outage.first_reaper, *late, outage.api):
        assert outage.exits[process.label] == 0, outage.exits


def test_a_worker_told_to_stop_during_the_outage_does_not_hang_on_it(outage):
    """Past its grace period it leaves its jobs to the reaper (exit 1), while the database is still away."""
    quitter = outage.quitter
    assert outage.quitter_exited_at is not None, quitter.output()[-3000:]
    assert outage.quitter_exited_at < outage.back_at
    assert outage.exits[quitter.label] == 1
    assert "could not deregister" in quitter.output()


# -- the logs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "process_name, component",
    [
        *(("first_worker", component) for component in FIRST_WORKER_COMPONENTS),
        ("first_reaper", "reaper"),
        ("late_worker", "worker"),
        ("late_reaper", "reaper"),
        ("api", "api"),
    ],
)
def test_each_component_logs_the_outage_once_and_its_end_once(outage, process_name, component):
    process = getattr(outage, process_name)
    noticed, ended = _lines(process, component, "unavailable"), _lines(process, component, "available again")
    assert (len(noticed), len(ended)) == (1, 1), process.output()[-3000:]


@pytest.mark.parametrize(
    "process_name", ["first_worker", "first_reaper", "late_worker", "late_reaper", "api", "quitter"]
)
def test_no_traceback_in_any_log(outage, process_name):
    output = getattr(outage, process_name).output()
    assert "Traceback" not in output, output[-3000:]
