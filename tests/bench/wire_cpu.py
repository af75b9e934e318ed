"""CPU per request of the hot endpoints beside the bare view, in-process, without a socket.

    DATABASE_URL=postgres://... python -m tests.bench.wire_cpu [--requests 300] [--rounds 6] [--profile push]

The suite's ``http`` section measures over gunicorn on a shared 2-core
machine, where one run's figures move with whatever else runs. This calls
Django's WSGI handler (the bench project: its settings and middleware, the
floor ``/bench/bare``) directly and counts ``time.process_time`` per
request, the modes alternated round by round; prints the median of the
rounds per mode and its ratio to the bare view. The database is the one
``DATABASE_URL`` names (migrated, its jobs emptied, keys added).

Modes: ``bare`` (GET /bench/bare), ``push`` (POST /ojs/v1/jobs, one job),
``loop`` (FETCH 10 then ACK each, per job, as the suite's worker loop),
``ack`` and ``fetch`` (the loop's two parts, each per request), ``core_ack``
(``Job.objects.ack`` without HTTP, per job: what the HTTP layer adds to it).
``--profile MODE`` runs cProfile over one round of that mode instead.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import django

MEDIA_TYPE = "application/openjobspec+json"


def environ(method: str, path: str, key: str, body: object = None) -> dict:
    payload = b"" if body is None else json.dumps(body).encode()
    return {
        "REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "127.0.0.1:8000", "HTTP_CONNECTION": "keep-alive",
        "HTTP_AUTHORIZATION": f"Bearer {key}", "CONTENT_TYPE": MEDIA_TYPE,
        "CONTENT_LENGTH": str(len(payload)), "HTTP_ACCEPT": "*/*", "HTTP_ACCEPT_ENCODING": "identity",
        "wsgi.input": io.BytesIO(payload), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
        "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False, "wsgi.version": (1, 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--mode", action="append", help="only these modes (repeatable)")
    parser.add_argument("--profile", help="cProfile one mode (sorted by cumulative time)")
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.bench.settings")
    django.setup()
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application

    from django_ojs.models import ApiKey

    from . import store

    call_command("migrate", verbosity=0)
    store.reset()
    _, key = ApiKey.objects.issue("bench", ["admin"])
    application = get_wsgi_application()

    def call(method: str, path: str, body: object = None) -> bytes:
        statuses: list[str] = []
        chunks = application(environ(method, path, key, body), lambda status, headers: statuses.append(status))
        data = b"".join(chunks)
        chunks.close()
        if not statuses[0].startswith("2"):
            raise SystemExit(f"{method} {path}: {statuses[0]} {data[:300]!r}")
        return data

    def fetch() -> list[str]:
        body = {"queues": [store.QUEUE], "count": 10, "worker_id": "bench-cpu"}
        return [job["id"] for job in json.loads(call("POST", "/ojs/v1/workers/fetch", body))["jobs"]]

    def ack(job_id: str) -> None:
        call("POST", "/ojs/v1/workers/ack", {"job_id": job_id, "worker_id": "bench-cpu"})

    # Each mode: (units done, seconds of CPU) for about ``requests`` requests.
    def bare() -> tuple[int, float]:
        began = time.process_time()
        for _ in range(options.requests):
            call("GET", "/bench/bare")
        return options.requests, time.process_time() - began

    def push() -> tuple[int, float]:
        began = time.process_time()
        for _ in range(options.requests):
            call("POST", "/ojs/v1/jobs", {"type": store.NOOP, "args": []})
        return options.requests, time.process_time() - began

    def loop() -> tuple[int, float]:
        store.fill(options.requests)
        done, began = 0, time.process_time()
        while done < options.requests:
            for job_id in fetch():
                ack(job_id)
                done += 1
        return done, time.process_time() - began

    def fetch_only() -> tuple[int, float]:
        store.fill(options.requests * 10)
        began = time.process_time()
        for _ in range(options.requests):
            fetch()
        return options.requests, time.process_time() - began

    def ack_only() -> tuple[int, float]:
        store.fill(options.requests)
        ids = [job_id for _ in range(-(-options.requests // 10)) for job_id in fetch()]
        began = time.process_time()
        for job_id in ids:
            ack(job_id)
        return len(ids), time.process_time() - began

    def core_ack() -> tuple[int, float]:
        from django_ojs.core.types import Lease
        from django_ojs.models import Job

        store.fill(options.requests)
        ids = [job_id for _ in range(-(-options.requests // 10)) for job_id in fetch()]
        began = time.process_time()
        for job_id in ids:
            Job.objects.ack(job_id, lease=Lease("bench-cpu", None))
        return len(ids), time.process_time() - began

    modes: dict[str, Callable[[], tuple[int, float]]] = {
        "bare": bare, "push": push, "loop": loop, "fetch": fetch_only, "ack": ack_only, "core_ack": core_ack}
    chosen = options.mode or list(modes)
    for name in chosen:  # warm up: code paths, caches, the connection
        modes[name]()
        store.reset()
    if options.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile(time.process_time)
        profile.runcall(modes[options.profile])
        stats = pstats.Stats(profile).sort_stats(os.environ.get("SORT", "cumulative"))
        stats.print_stats(int(os.environ.get("LINES", "60")))
        if os.environ.get("CALLEES"):  # e.g. CALLEES=fastpush.py:60 -- what one function spends its time in
            stats.print_callees(os.environ["CALLEES"])
        return
    results: dict[str, list[float]] = {name: [] for name in chosen}
    for _ in range(options.rounds):
        for name in chosen:
            units, seconds = modes[name]()
            results[name].append(seconds * 1000 / units)
            store.reset()
    floor = statistics.median(results["bare"]) if "bare" in results else None
    for name, samples in results.items():
        ms = statistics.median(samples)
        ratio = f"  {ms / floor:.2f}x bare" if floor and name != "bare" else ""
        print(f"{name:6} {ms:.3f} ms CPU per {'job' if name in ('loop', 'ack', 'core_ack') else 'request'}{ratio}"
              f"  (rounds: {', '.join(f'{s:.3f}' for s in samples)})")


if __name__ == "__main__":
    main()
