"""The benchmark suite: every speed figure of django-ojs beside its floor and its peer, in one run.

    python -m tests.bench.suite                 # everything (~10-15 min on 2 cores)
    python -m tests.bench.suite --quick         # a smoke run of every section (~1-2 min)
    python -m tests.bench.suite --only worker,http --repeat 5 --json figures.jsonl

It creates its own database ``ojs_bench_<random>`` on the PostgreSQL server of
``DATABASE_URL`` (default postgres://postgres@127.0.0.1:5432; only the server
is used) and drops it at the end. Prints the run's machine, a table (figure,
ours, floor, ratio to floor, pgqueuer, ratio to pgqueuer, target, met?) and
one JSON line per figure (the first line, ``{"run": ...}``, describes the
run). Every number is measured in this run; the ratios are what to read.
Progress goes to stderr.

Sections (each a module of tests/bench): enqueue, worker, http, fetch, pickup.
The peer, pgqueuer, comes with ``pip install -e '.[bench]'``; ``--no-peer``
runs without it and says so in the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from . import peer
from .plan import Run, Sizes
from .report import Figure, json_lines, observability_table, table
from .stage import DEFAULT_SERVER, BenchError, bench_database

SECTIONS = ("enqueue", "worker", "http", "fetch", "pickup")


def section_runner(name: str) -> Callable[[Run], list[Figure]]:
    """Imported late: the sections import Django models, ready only once the database exists."""
    from . import enqueue, fetch, pickup, wire, workers

    return {"enqueue": enqueue.run, "worker": workers.run, "http": wire.run, "fetch": fetch.run,
            "pickup": pickup.run}[name]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.suite", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat: a smoke run")
    parser.add_argument("--jobs", type=int, help="jobs per bulk enqueue and per worker run (default 20,000)")
    parser.add_argument("--single", type=int, help="jobs enqueued one by one (default 2,000)")
    parser.add_argument("--repeat", type=int, help="runs per figure, the median is reported (default 3)")
    parser.add_argument("--fetch-large", type=int, help="the large FETCH backlog (default 1,000,000)")
    parser.add_argument("--http-seconds", type=float, help="load per HTTP figure (default 5)")
    parser.add_argument("--only", type=lambda value: value.split(","), default=list(SECTIONS),
                        help=f"comma-separated sections to run: {','.join(SECTIONS)}")
    parser.add_argument("--json", metavar="FILE", help="also write the JSON lines to FILE")
    parser.add_argument("--markdown", action="store_true", help="print the table in Markdown (for docs/explanation/performance.md)")
    parser.add_argument("--observability", action="store_true",
                        help="their cost: the worker section runs each shape off, with metrics on, and with "
                             "metrics and tracing on (an OTel SDK exporting to nowhere), interleaved, and "
                             "reports each against off; the other sections run with both on")
    parser.add_argument("--job-cpu-ms", type=float, default=0.0, metavar="MS",
                        help="the worker section's jobs each use MS of CPU (default 0: no-op jobs); with "
                             "--observability, what metrics and tracing cost jobs that do some work")
    parser.add_argument("--no-peer", action="store_true", help="run without pgqueuer (the table says so)")
    parser.add_argument("--server", default=os.environ.get("DATABASE_URL", DEFAULT_SERVER),
                        help="a PostgreSQL URL naming the server (default: $DATABASE_URL, else %(default)s)")
    options = parser.parse_args(argv)
    unknown = set(options.only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    if options.job_cpu_ms < 0:
        parser.error("--job-cpu-ms must be 0 or more")
    if not options.no_peer and peer.available() is None:
        parser.error("pgqueuer is not installed: pip install -e '.[bench]', or pass --no-peer")
    return options


def sizes_of(options: argparse.Namespace) -> Sizes:
    sizes = Sizes.quick() if options.quick else Sizes()
    overrides = {"jobs": options.jobs, "single": options.single, "repeat": options.repeat,
                 "fetch_large": options.fetch_large, "http_seconds": options.http_seconds}
    return dataclasses.replace(sizes, **{name: value for name, value in overrides.items() if value is not None})


def describe_run(sizes: Sizes, peer_version: str | None) -> dict[str, Any]:
    from django.db import connection

    from django_ojs.conf import ojs_settings

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version'), current_setting('fsync'), "
                       "current_setting('synchronous_commit'), current_database()")
        version, fsync, synchronous_commit, database = cursor.fetchone()
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "postgresql": version,
        "fsync": fsync,
        "synchronous_commit": synchronous_commit,
        "database": database,
        "events": ojs_settings.EVENTS,
        "pgqueuer": peer_version,
        "sizes": dataclasses.asdict(sizes),
        "observability": os.environ.get("OJS_METRICS") == "true",
    }


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    if options.observability:
        import tempfile

        # Read by the processes the suite starts (Stage.env copies os.environ) and by tests/bench/settings.py.
        os.environ.update(OJS_METRICS="true", OJS_TRACING="true", OJS_BENCH_OTEL_SDK="1",
                          PROMETHEUS_MULTIPROC_DIR=tempfile.mkdtemp(prefix="ojs-bench-prometheus-"))
    sizes = sizes_of(options)
    peer_version = None if options.no_peer else peer.available()
    figures: list[Figure] = []
    began = time.monotonic()
    try:
        with bench_database(options.server) as stage:
            run = Run(stage, sizes, peer=peer_version is not None,
                      peer_note="not run (--no-peer)" if peer_version is None else "",
                      observability=options.observability, job_cpu_ms=options.job_cpu_ms)
            if run.peer:
                peer.install(stage.dsn)
            described = describe_run(sizes, peer_version)
            for name in (section for section in SECTIONS if section in options.only):
                print(f"[{time.monotonic() - began:5.0f}s] {name} ...", file=sys.stderr, flush=True)
                figures += section_runner(name)(run)
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    described["seconds"] = round(time.monotonic() - began)
    described["load_average_after"] = [round(value, 2) for value in os.getloadavg()]
    lines = json.dumps({"run": described}) + "\n" + json_lines(figures) + "\n"
    print(header(described))
    print(table(figures, markdown=options.markdown))
    if options.observability and "worker" in options.only:
        print()
        print(observability_table(figures, markdown=options.markdown))
    print()
    print(lines, end="")
    if options.json:
        with open(options.json, "w") as out:
            out.write(lines)
    return 0


def header(described: dict[str, Any]) -> str:
    peer_line = f"pgqueuer {described['pgqueuer']}" if described["pgqueuer"] else "pgqueuer not run (--no-peer)"
    return (
        f"django-ojs benchmark, {described['date']}: {described['cores']} cores, load average "
        f"{described['load_average'][0]} before and {described['load_average_after'][0]} after, "
        f"PostgreSQL {described['postgresql']} (fsync {described['fsync']}, synchronous_commit "
        f"{described['synchronous_commit']}), events {'on' if described['events'] else 'OFF'}, {peer_line}; "
        f"{described['seconds']} s\nsizes: "
        + ", ".join(f"{name} {value:,}" for name, value in described["sizes"].items())
        + "\nratios are ours ÷ floor and ours ÷ pgqueuer, medians of the repeats; "
        "the figures are this machine's, the ratios are what to read\n"
    )


if __name__ == "__main__":
    sys.exit(main())
