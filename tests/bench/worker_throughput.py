"""Noop throughput of ``manage.py ojs_worker`` on PostgreSQL (a benchmark, not a test).

Pre-enqueues N ``demo.noop`` jobs with ``push_many``, starts P worker
processes, and measures until every job is completed. Two figures:

- wall: from starting the workers to the last completion (includes Django start-up);
- store: from the first claim (min started_at) to the last completion
  (max completed_at), as the database stamped them.

Usage (it empties the job tables of the database it is pointed at)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ojs_worker \\
        python tests/bench/worker_throughput.py --jobs 100000 --processes 1 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

import django  # noqa: E402

django.setup()

from django.db.models import Max, Min  # noqa: E402

from django_ojs.core.testing import reset_store  # noqa: E402
from django_ojs.envelope import parse_job  # noqa: E402
from django_ojs.models import Job  # noqa: E402


def enqueue(count: int) -> float:
    started = time.perf_counter()
    for offset in range(0, count, 1000):
        Job.objects.push_many([parse_job({"type": "demo.noop", "args": []}) for _ in range(min(1000, count - offset))])
    return time.perf_counter() - started


def run(jobs: int, processes: int, concurrency: int, events: bool, profile: str | None) -> None:
    reset_store()
    seconds = enqueue(jobs)
    print(f"enqueued {jobs} jobs in {seconds:.1f}s ({jobs / seconds:,.0f}/s)")
    env = {**os.environ, "OJS_LOG_LEVEL": "WARNING", "OJS_EVENTS": "1" if events else "0"}
    command = [sys.executable, str(ROOT / "manage.py"), "ojs_worker", "--concurrency", str(concurrency)]
    started = time.perf_counter()
    workers = []
    for index in range(processes):
        argv = command
        if profile and index == 0:
            argv = [sys.executable, "-m", "cProfile", "-o", profile, *command[1:]]
        workers.append(subprocess.Popen(argv, cwd=ROOT, env=env))
    # Cheap to ask (two partial indexes), so the polling does not load the database.
    while Job.objects.filter(state="available").exists() or Job.objects.filter(state="active").exists():
        time.sleep(0.5)
    wall = time.perf_counter() - started
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.wait(30)
    span = Job.objects.aggregate(first=Min("started_at"), last=Max("completed_at"))
    store = (span["last"] - span["first"]).total_seconds()
    print(
        f"{processes} process(es) x concurrency {concurrency}, events {'on' if events else 'off'}: "
        f"{jobs / store:,.0f} jobs/s by the store's clock ({store:.1f}s), "
        f"{jobs / wall:,.0f} jobs/s wall ({wall:.1f}s incl. start-up)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--no-events", action="store_true", help="OJS['EVENTS'] off in the workers")
    parser.add_argument("--profile", help="cProfile the first worker into this file")
    options = parser.parse_args()
    for processes in options.processes:
        run(options.jobs, processes, options.concurrency, not options.no_events, options.profile)


if __name__ == "__main__":
    main()
