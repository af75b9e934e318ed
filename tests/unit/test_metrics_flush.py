"""The worker's histograms, written once per turn, hold what one observe() per execution would."""

from __future__ import annotations

import datetime as dt
import threading
import uuid

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client import CollectorRegistry, Histogram

from django_ojs.models import Job
from django_ojs.observe import metrics


def samples(histogram_samples, **labels) -> dict[str, float]:
    return {f"{s.name}{s.labels.get('le', '')}": s.value for s in histogram_samples
            if all(s.labels.get(k) == v for k, v in labels.items()) and not s.name.endswith("_created")}


def test_held_observations_flushed_equal_one_observe_each():
    queue = f"flush-{uuid.uuid4().hex[:8]}"
    now = dt.datetime.now(dt.UTC)
    amounts = [0.0, 0.004, 0.005, 0.0051, 0.3, 0.3, 7.0, 299.0, 301.0, 1e6]  # edges, a tie, past the last bound
    jobs = [Job(id=uuid.uuid4(), type="flush.job", queue=queue, attempt=1,
                enqueued_at=now - dt.timedelta(seconds=amount), started_at=now) for amount in amounts]
    # From several threads, as the handler threads observe.
    threads = [threading.Thread(target=metrics.observe_execution, args=(job, "completed", amount))
               for job, amount in zip(jobs, amounts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = Histogram("ojs_job_duration_seconds", "d", ("queue", "type", "state"),
                         buckets=metrics.DURATION_BUCKETS, registry=CollectorRegistry())
    for amount in amounts:
        expected.labels(queue, "flush.job", "completed").observe(amount)

    def ours():
        return samples(next(iter(metrics.DURATION.collect())).samples, queue=queue)

    assert ours().get("ojs_job_duration_seconds_count", 0) == 0  # held until the flush
    metrics.flush_observations()
    assert ours() == samples(next(iter(expected.collect())).samples, queue=queue)
    waits = samples(next(iter(metrics.QUEUE_TIME.collect())).samples, queue=queue)
    assert waits["ojs_job_queue_time_seconds_count"] == len(amounts)
    assert waits["ojs_job_queue_time_seconds_sum"] == pytest.approx(sum(amounts))
