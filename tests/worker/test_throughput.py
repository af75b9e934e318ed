"""Many workers, many jobs: each job runs exactly once, no worker exceeds its concurrency."""

from __future__ import annotations

import itertools
import re
import signal
from collections import defaultdict

import pytest
from django.db.models import Count

from django_ojs.models import Job
from django_ojs.protocol.envelope import parse_job

from .conftest import PATIENCE, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

WORKERS = 4
# 8,000 jobs: enough for every worker to run thousands, turn after turn; 20,000 cost CI a minute per env.
JOBS_PER_WORKER = 2000
CONCURRENCY = 10


def max_overlap(intervals: list[tuple]) -> int:
    """Most intervals [start, end) open at one instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    # At equal instants the end sorts first (-1 < 1): a slot freed and
    # refilled in one transaction is not counted twice.
    open_now = peak = 0
    for _, step in edges:
        open_now += step
        peak = max(peak, open_now)
    return peak


def test_four_workers_run_eight_thousand_jobs_exactly_once_within_their_concurrency(worker):
    total = WORKERS * JOBS_PER_WORKER
    for _ in range(0, total, 1000):
        Job.objects.push_many([parse_job({"type": "probe.record", "args": []}) for _ in range(1000)])
    processes = [worker("--concurrency", str(CONCURRENCY)) for _ in range(WORKERS)]

    wait_until(lambda: Job.objects.filter(state="completed").count() == total, 900, "every job to complete", 0.5)

    # Exactly once, from the handlers' own records: one run per job, all on attempt 1.
    assert Execution.objects.count() == total
    assert Execution.objects.values("job_id").distinct().count() == total
    assert not Execution.objects.values("job_id").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert set(Job.objects.values_list("attempt", flat=True)) == {1}

    # Concurrency, from the store: a job is held from its claim (started_at)
    # to its completion (completed_at), both stamped by the database.
    held = defaultdict(list)
    for worker_id, started, completed in Job.objects.values_list("worker_id", "started_at", "completed_at"):
        held[worker_id].append((started, completed))
    assert len(held) == WORKERS
    assert all(len(intervals) > 0 for intervals in held.values())
    peaks = {worker_id: max_overlap(intervals) for worker_id, intervals in held.items()}
    assert max(peaks.values()) <= CONCURRENCY, peaks
    print(f"\nper-worker peak of held jobs (from the store): {sorted(peaks.values())}")

    for process in processes:
        process.send(signal.SIGTERM)
    for process in processes:
        assert process.wait(timeout=PATIENCE) == 0
        used = int(re.search(r"at most (\d+) of 10 slots in use", process.output).group(1))
        assert used <= CONCURRENCY


def test_the_turn_that_writes_finished_jobs_claims_the_slots_they_free(worker):
    """One transaction per turn: the write of a finished batch also claims for the slots it frees.

    Without it, a worker whose slots are all taken writes a batch in one
    transaction and claims in the next: two commits per batch. With one slot,
    every job after the first is claimed in the transaction that completed
    the one before it, so its ``started_at`` is that ``completed_at`` (both
    the transaction's timestamp).
    """
    Job.objects.push_many([parse_job({"type": "probe.noop", "args": [], "options": {"queue": "turns"}})
                           for _ in range(20)])
    process = worker("--concurrency", "1", "--queue", "turns")
    wait_until(lambda: Job.objects.filter(queue="turns", state="completed").count() == 20, PATIENCE,
               "every job to complete")
    held = list(Job.objects.filter(queue="turns").order_by("started_at").values_list("started_at", "completed_at"))
    assert [later[0] == earlier[1] for earlier, later in itertools.pairwise(held)] == [True] * 19, held
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0
