"""Rate and concurrency limits across real worker processes (ojs-rate-limiting §5).

Starts are read from the store (``started_at``, the database clock), and
the handlers' own records give each run's span.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import Count

from django_ojs.core import queue_config
from django_ojs.models import Job
from django_ojs.protocol.envelope import parse_job

from .conftest import wait_until
from .probe.models import Execution
from .test_throughput import max_overlap

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

WORKERS = 4
RATE = 10  # jobs per second
BURSTS = 5


def test_a_rate_of_n_per_second_holds_across_four_worker_processes(worker):
    total = RATE * BURSTS
    for _ in range(WORKERS):
        worker("--queue", "metered", "--concurrency", "10")
    Job.objects.push_many(
        [parse_job({"type": "probe.record", "args": [], "options": {"queue": "metered",
                    "rate_limit": {"key": "metered-api", "rate": {"limit": RATE, "period": "PT1S"}}}})
         for _ in range(total)]
    )
    wait_until(lambda: Job.objects.filter(state="completed").count() == total, 60, "every job to complete", 0.2)

    starts = sorted(Job.objects.values_list("started_at", flat=True))
    takers = len(set(Job.objects.values_list("worker_id", flat=True)))
    # The window slides: no second of the run holds more than RATE starts.
    second = dt.timedelta(seconds=1)
    assert max(sum(1 for s in starts if first <= s < first + second) for first in starts) <= RATE
    # And the limit is used, not just respected: after the first burst, RATE per second within 10 %.
    measured = (total - RATE) / (starts[-1] - starts[0]).total_seconds()
    print(f"\nrate limit {RATE}/s across {WORKERS} workers ({takers} took jobs): measured {measured:.2f}/s")
    assert RATE * 0.9 <= measured <= RATE * 1.1


def test_a_concurrency_limit_of_k_never_has_more_than_k_active(worker):
    limit, total = 3, 24
    queue_config.update("narrow", {"concurrency": limit})
    Job.objects.push_many(
        [parse_job({"type": "probe.record", "args": [0.2], "options": {"queue": "narrow"}}) for _ in range(total)]
    )
    for _ in range(WORKERS):
        worker("--queue", "narrow", "--concurrency", "5")

    # From the store: each poll is one statement, one snapshot of committed
    # claims and completions -- what the limit is enforced on. (The rows'
    # started_at/completed_at are not: both are their transaction's start
    # time, earlier than its commit, so intervals built from them overlap
    # by up to a transaction's length without any two jobs ever being
    # active together.)
    active_seen: list[int] = []

    def all_completed() -> bool:
        counts = dict(
            Job.objects.filter(queue="narrow").values_list("state").annotate(n=Count("seq")).values_list("state", "n")
        )
        active_seen.append(counts.get("active", 0))
        return counts.get("completed", 0) == total

    wait_until(all_completed, 90, "every job to complete", 0.01)
    assert max(active_seen) <= limit, active_seen
    # From the handlers (wall clock, inside the claim-to-ACK span): never more
    # than the limit running at once, and the limit was reached.
    runs = list(Execution.objects.values_list("started_at", "finished_at"))
    assert len(runs) == total
    assert max_overlap(runs) <= limit
    assert max_overlap(runs) == limit
