"""Section ``fetch``: does a claim cost the same with 1,000 and with 1,000,000 jobs waiting?

Fills the store with available jobs (store.fill: real rows, cloned in SQL),
then times ``Job.objects.fetch(count=10)`` through the core, in this
process, round after round; the backlog never drops below its size. p50 and
p99 of each backlog; the large backlog's figures are compared with the
small one's (its floor).
"""

from __future__ import annotations

import time

from django_ojs.models import Job

from . import store
from .plan import Run
from .report import Figure, Target, percentile
from .stage import BenchError

COUNT = 10
WARM_UP = 20
QUEUE = "bench-fetch"


def latencies(backlog: int, rounds: int) -> list[float]:
    """Milliseconds per FETCH of ``COUNT`` jobs with ``backlog`` available."""
    store.reset()
    store.fill(backlog + (WARM_UP + rounds) * COUNT, queue=QUEUE)
    for _ in range(WARM_UP):
        Job.objects.fetch([QUEUE], count=COUNT, worker_id="bench-fetch")
    timings = []
    for _ in range(rounds):
        began = time.perf_counter()
        claimed = Job.objects.fetch([QUEUE], count=COUNT, worker_id="bench-fetch")
        timings.append((time.perf_counter() - began) * 1000)
        if len(claimed) != COUNT:
            raise BenchError(f"FETCH claimed {len(claimed)} of {COUNT} jobs from a full backlog")
    return timings


def run(context: Run) -> list[Figure]:
    small, large, rounds = context.sizes.fetch_small, context.sizes.fetch_large, context.sizes.fetch_rounds
    measured = {size: latencies(size, rounds) for size in (small, large)}
    figures = []
    for pct in (50, 99):
        base = percentile(measured[small], pct)
        figures.append(Figure(
            f"fetch.p{pct}.small", f"FETCH {COUNT} p{pct}, {small:,} available", "ms", base,
            peer_note="not measured", detail={"available": small, "rounds": rounds},
        ))
        targets = (Target("floor", "<=", 1.5),) if pct == 50 else ()
        figures.append(Figure(
            f"fetch.p{pct}.large", f"FETCH {COUNT} p{pct}, {large:,} available", "ms",
            percentile(measured[large], pct), floor=base, floor_name=f"the same FETCH with {small:,} available",
            peer_note="not measured", targets=targets, detail={"available": large, "rounds": rounds},
        ))
    return figures
