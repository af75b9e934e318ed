"""Section ``http``: the binding under load, beside a bare Django view on the same server.

gunicorn (2 workers × 4 threads) serves the example project plus
``/bench/bare`` (tests/bench/urls.py: a view that returns ``{"ok": true}``
under the same middleware) on the suite's database. 8 client threads with
keep-alive connections (http.client) load one endpoint at a time for
``http_seconds``; every response must be a 2xx. Server CPU is the gunicorn
workers' user + system time (/proc/<pid>/stat) over the load, per request
or per job; PostgreSQL's own CPU is not in it.

The worker loop is what an HTTP worker does: FETCH 10 from ``default``,
then ACK each, with jobs waiting (store.fill); the batch worker loop ACKs
the ten in one batch ACK (``/ojs/v1/workers/ack/batch``, this server's
extension) instead; the turn loop sends one request a turn, the batch ACK of
the last turn's jobs carrying the FETCH of the next ten (its ``fetch``), as
the in-process worker's turn writes and claims in one transaction.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django_ojs.models import ApiKey
from tests.conformance.harness import free_port

from . import store
from .plan import Run
from .report import Figure, Target, median
from .stage import BenchError, Process, children, cpu_seconds, started, wait_for

MEDIA_TYPE = "application/openjobspec+json"
BATCH = 100
FETCH_COUNT = 10
WARM_UP = 0.5  # seconds of load before each measurement: connections open, code paths warm


class Client:
    """One keep-alive connection; ``call`` returns the decoded JSON body of a 2xx answer."""

    def __init__(self, port: int, key: str):
        self.port = port
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": MEDIA_TYPE}
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.held: list[dict] = []  # the turn loop's jobs claimed by its last request

    def call(self, method: str, path: str, body: object = None) -> dict:
        payload = None if body is None else json.dumps(body)
        self.connection.request(method, path, payload, self.headers)
        response = self.connection.getresponse()
        data = response.read()
        if not 200 <= response.status < 300:
            raise BenchError(f"{method} {path} answered {response.status}: {data[:300]!r}")
        return json.loads(data)


# One unit of work for a client: returns (units done, requests sent).
Step = Callable[[Client, int], tuple[int, int]]


def bare(client: Client, index: int) -> tuple[int, int]:
    client.call("GET", "/bench/bare")
    return 1, 1


def health(client: Client, index: int) -> tuple[int, int]:
    client.call("GET", "/ojs/v1/health")
    return 1, 1


def push(client: Client, index: int) -> tuple[int, int]:
    client.call("POST", "/ojs/v1/jobs", {"type": store.NOOP, "args": []})
    return 1, 1


def push_batch(client: Client, index: int) -> tuple[int, int]:
    client.call("POST", "/ojs/v1/jobs/batch", {"jobs": [{"type": store.NOOP, "args": []}] * BATCH})
    return BATCH, 1


def worker_loop(client: Client, index: int) -> tuple[int, int]:
    worker_id = f"bench-http-{index}"
    jobs = _fetched(client, worker_id)
    for job in jobs:
        client.call("POST", "/ojs/v1/workers/ack", {"job_id": job["id"], "worker_id": worker_id})
    return len(jobs), 1 + len(jobs)


def batch_worker_loop(client: Client, index: int) -> tuple[int, int]:
    worker_id = f"bench-http-{index}"
    jobs = _fetched(client, worker_id)
    acks = [{"job_id": job["id"], "attempt": job["attempt"], "worker_id": worker_id} for job in jobs]
    reply = client.call("POST", "/ojs/v1/workers/ack/batch", {"acks": acks})
    if reply["acknowledged"] != len(jobs):
        raise BenchError(f"the batch ACK refused {reply['refused']} of {len(jobs)} jobs it held: {reply['results']}")
    return len(jobs), 2


def turn_loop(client: Client, index: int) -> tuple[int, int]:
    worker_id = f"bench-http-{index}"
    acks = [{"job_id": job["id"], "attempt": job["attempt"], "worker_id": worker_id} for job in client.held]
    reply = client.call("POST", "/ojs/v1/workers/ack/batch", {
        "acks": acks, "fetch": {"queues": [store.QUEUE], "count": FETCH_COUNT, "worker_id": worker_id}})
    if reply["acknowledged"] != len(acks):
        raise BenchError(f"the batch ACK refused {reply['refused']} of {len(acks)} jobs it held: {reply['results']}")
    if not reply["jobs"]:
        raise BenchError("the HTTP worker loop ran out of jobs: the backlog was too small")
    client.held = reply["jobs"]
    return len(acks), 1


def _fetched(client: Client, worker_id: str) -> list[dict]:
    jobs = client.call("POST", "/ojs/v1/workers/fetch",
                       {"queues": [store.QUEUE], "count": FETCH_COUNT, "worker_id": worker_id})["jobs"]
    if not jobs:
        raise BenchError("the HTTP worker loop ran out of jobs: the backlog was too small")
    return jobs


@dataclass
class Load:
    units: int
    requests: int
    seconds: float
    cpu: float  # server CPU seconds

    @property
    def rate(self) -> float:
        return self.units / self.seconds

    @property
    def cpu_ms_per_unit(self) -> float:
        return self.cpu * 1000 / self.units


def connect(port: int, key: str, pids: list[int], clients: int) -> list[Client]:
    """``clients`` keep-alive connections, spread evenly over the workers ``pids``.

    Which worker accepts a connection is a race; left to it, all 8 may land
    on one worker and the figure halves. Each connection asks the bare view
    which process answered, and one that lands on a full worker is redone.
    """
    share = -(-clients // len(pids))
    held: dict[int, int] = dict.fromkeys(pids, 0)
    connected: list[Client] = []
    for _ in range(clients * 50):
        client = Client(port, key)
        pid = client.call("GET", "/bench/bare")["pid"]
        if held.get(pid, share) < share:
            held[pid] += 1
            connected.append(client)
            if len(connected) == clients:
                return connected
        else:
            client.connection.close()
    raise BenchError(f"could not spread {clients} connections over gunicorn's workers: {held}")


def load(port: int, key: str, pids: list[int], step: Step, clients: int, seconds: float) -> Load:
    """``clients`` threads run ``step`` over keep-alive connections for ``seconds``."""
    counts = [[0, 0] for _ in range(clients)]
    errors: list[BaseException] = []
    start = threading.Barrier(clients + 1)
    stop = threading.Event()
    connections = connect(port, key, pids, clients)

    def client_thread(index: int) -> None:
        client = connections[index]
        try:
            start.wait()
            while not stop.is_set():
                units, requests = step(client, index)
                counts[index][0] += units
                counts[index][1] += requests
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
            stop.set()
        finally:
            client.connection.close()

    threads = [threading.Thread(target=client_thread, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    cpu_before = cpu_seconds(pids)
    start.wait()
    began = time.perf_counter()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join(60)
    elapsed = time.perf_counter() - began
    cpu = cpu_seconds(pids) - cpu_before
    if errors:
        raise errors[0]
    return Load(sum(c[0] for c in counts), sum(c[1] for c in counts), elapsed, cpu)


@dataclass(frozen=True)
class Endpoint:
    name: str
    label: str
    step: Step
    rate_unit: str
    cpu_unit: str


PER_REQUEST, PER_JOB = ("req/s", "ms/req"), ("jobs/s", "ms/job")
ENDPOINTS = (
    Endpoint("bare", "bare Django view (GET /bench/bare)", bare, *PER_REQUEST),
    Endpoint("health", "GET /ojs/v1/health", health, *PER_REQUEST),
    Endpoint("push", "POST /ojs/v1/jobs", push, *PER_REQUEST),
    Endpoint("batch", f"POST /ojs/v1/jobs/batch of {BATCH}", push_batch, *PER_JOB),
    Endpoint("worker_loop", f"HTTP worker loop (FETCH {FETCH_COUNT}, ACK each)", worker_loop, *PER_JOB),
    Endpoint("batch_worker_loop", f"HTTP worker loop (FETCH {FETCH_COUNT}, one batch ACK)", batch_worker_loop,
             *PER_JOB),
    Endpoint("turn_loop", f"HTTP worker loop (one batch ACK carrying the FETCH of {FETCH_COUNT})", turn_loop,
             *PER_JOB),
)
# Jobs each loop may work a second, at most, on this machine: its backlog is filled for that.
LOOPS = {worker_loop: 20_000, batch_worker_loop: 40_000, turn_loop: 60_000}


def run(context: Run) -> list[Figure]:
    sizes = context.sizes
    _, key = ApiKey.objects.issue("bench", ["admin"])
    port = free_port()
    server = Process.module(context.stage, "gunicorn", "example_project.wsgi:application",
                            "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4",
                            "--worker-class", "gthread", "--log-level", "warning")
    measured: dict[str, list[Load]] = {endpoint.name: [] for endpoint in ENDPOINTS}
    with started([server]):
        pids = wait_for(lambda: _workers(server.pid), 60, "gunicorn's 2 workers", [server])
        wait_for(lambda: _answers(port), 60, "gunicorn to answer", [server])
        for _ in range(sizes.repeat):
            for endpoint in ENDPOINTS:
                store.reset()
                if endpoint.step in LOOPS:
                    store.fill(int(LOOPS[endpoint.step] * (sizes.http_seconds + WARM_UP)))
                load(port, key, pids, endpoint.step, sizes.http_clients, WARM_UP)
                measured[endpoint.name].append(
                    load(port, key, pids, endpoint.step, sizes.http_clients, sizes.http_seconds))
        server.stop()
    return _figures(measured, sizes.http_clients)


def _workers(master: int) -> list[int]:
    """gunicorn's worker PIDs once both have started; empty before."""
    found = children(master)
    return found if len(found) == 2 else []


def _answers(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/bench/bare")
        return connection.getresponse().status == 200
    except OSError:
        return False


def _figures(measured: dict[str, list[Load]], clients: int) -> list[Figure]:
    bare_rate = median([sample.rate for sample in measured["bare"]])
    bare_cpu = median([sample.cpu_ms_per_unit for sample in measured["bare"]])
    figures = []
    for endpoint in ENDPOINTS:
        samples = measured[endpoint.name]
        rates = [sample.rate for sample in samples]
        cpus = [sample.cpu_ms_per_unit for sample in samples]
        is_floor = endpoint.name == "bare"
        rate_targets = (Target("floor", ">=", 0.7),) if endpoint.name in ("batch_worker_loop", "turn_loop") else ()
        cpu_targets = (Target("floor", "<=", 1.5),) if endpoint.name == "push" else ()
        detail = {"clients": clients, "requests": [sample.requests for sample in samples]}
        figures += [
            Figure(f"http.{endpoint.name}.rate", endpoint.label, endpoint.rate_unit, median(rates),
                   floor=None if is_floor else bare_rate, floor_name="" if is_floor else "bare Django view, req/s",
                   peer_note="no counterpart", targets=rate_targets, samples=rates, detail=detail),
            Figure(f"http.{endpoint.name}.cpu", f"{endpoint.label}, server CPU", endpoint.cpu_unit, median(cpus),
                   floor=None if is_floor else bare_cpu,
                   floor_name="" if is_floor else "bare Django view, ms CPU/req",
                   peer_note="no counterpart", targets=cpu_targets, samples=cpus),
        ]
    return figures
