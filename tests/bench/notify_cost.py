"""What the ``ojs_settled`` trigger (migration 0021) costs the ACK path, on PostgreSQL.

``python -m tests.bench.notify_cost`` (``DATABASE_URL`` a scratch database; it
migrates it) times, with the trigger enabled and then disabled, a worker's
turn completing ``--batch`` jobs in one statement, and ``--singles`` ACKs of
one job each, and prints the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--singles", type=int, default=200)
    parser.add_argument("--alternations", type=int, default=6)
    options = parser.parse_args()
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from django_ojs.core.types import Lease, Settlement
    from django_ojs.models import Job, Worker
    from django_ojs.protocol.envelope import parse_job

    call_command("migrate", verbosity=0)
    Worker.objects.register("bench")

    def claimed(count: int) -> list[Job]:
        Job.objects.push_many([parse_job({"type": "bench", "args": [], "queue": "bench"}) for _ in range(count)])
        return Job.objects.fetch(["bench"], count=count, worker_id="bench")

    def turn_ms() -> float:
        jobs = claimed(options.batch)
        settlements = [Settlement(job.id, Lease("bench", job.attempt), result=1) for job in jobs]
        started = time.perf_counter()
        Job.objects.settle_and_fetch("bench", settlements, ["bench"], 0)
        return (time.perf_counter() - started) * 1000

    def single_us() -> float:
        jobs = claimed(options.singles)
        started = time.perf_counter()
        for job in jobs:
            Job.objects.ack(job.id, result=1, lease=Lease("bench", job.attempt))
        return (time.perf_counter() - started) * 1e6 / len(jobs)

    # Enabled and disabled alternate, so a machine's load changing meanwhile weighs on both alike.
    turns: dict[str, list[float]] = {"ENABLE": [], "DISABLE": []}
    singles: dict[str, list[float]] = {"ENABLE": [], "DISABLE": []}
    for _ in range(options.alternations):
        for trigger in ("ENABLE", "DISABLE"):
            with connection.cursor() as cursor:
                cursor.execute(f"ALTER TABLE django_ojs_job {trigger} TRIGGER django_ojs_job_settled")
            turns[trigger] += [turn_ms() for _ in range(options.rounds)]
            singles[trigger].append(single_us())
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_ojs_job ENABLE TRIGGER django_ojs_job_settled")
    for trigger in turns:
        print(f"trigger {trigger.lower()}d: turn of {options.batch} completions {statistics.median(turns[trigger]):.1f} ms"
              f" (median of {len(turns[trigger])}); single ACK {statistics.median(singles[trigger]):.0f} us"
              f" (median of {len(singles[trigger])} runs of {options.singles})")


if __name__ == "__main__":
    main()
