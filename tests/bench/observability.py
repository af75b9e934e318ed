"""The CPU cost per job of metrics and tracing in the worker, measured in-process without noise.

    PROMETHEUS_MULTIPROC_DIR=$(mktemp -d) python -m tests.bench.observability [--jobs 20000]

The suite's ``--observability`` runs measure throughput end to end, but on a
busy 2-core machine two runs differ by more than the 5 % budget. This
measures what metrics and tracing add per job on the worker's CPU, which is
the part that costs throughput: the execution wrapper (consumer span,
duration and queue-time histograms) and, per job, the two committed events
(started, completed) built from ``RETURNING`` rows and counted. Prints
microseconds per job, off and on; compare with the worker's CPU per job
(1 / jobs/s per core busy) from the suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
import uuid

import django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    jobs = parser.parse_args().jobs
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.bench.settings")
    os.environ.setdefault("DATABASE_URL", "sqlite:///:memory:")
    os.environ["OJS_BENCH_OTEL_SDK"] = "1"
    django.setup()
    from django.test import override_settings

    from django_ojs.conf import ojs_settings
    from django_ojs.handlers.context import JobContext
    from django_ojs.handlers.registry import registry
    from django_ojs.models import Event, Job
    from django_ojs.worker.execution import Execution, Runner

    now = dt.datetime.now(dt.UTC)

    registry.register("bench.obs.noop", lambda ctx: None)

    def executions():
        for _ in range(jobs):
            job = Job(id=uuid.uuid4(), type="bench.obs.noop", queue="default", args=[], meta={
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
                priority=0, attempt=1, enqueued_at=now, started_at=now)
            yield Execution(job=job, ctx=JobContext(job, "w1", lambda: None), lease=None, deadline=None)

    rows = [(i, uuid.uuid4(), "job.completed", now, uuid.uuid4(), "default",
             {"job_type": "bench.obs.noop", "queue": "default", "attempt": 1}) for i in range(2)]
    columns = ("seq", "id", "type", "time", "job_id", "queue", "data")

    def measure(on: bool) -> float:
        with override_settings(OJS={"METRICS": on, "TRACING": on}):
            assert ojs_settings.METRICS is on
            runner = Runner(registry, [], omit_backtraces=False)
            batch = list(executions())
            count = None
            if on:
                from django_ojs.metrics import count_event

                count = count_event
            started = time.process_time()
            for execution in batch:
                runner(execution)
                if count is not None:  # the job's two committed events, as the signal delivers them
                    for row in rows:
                        count(Event, event=Event(**dict(zip(columns, row))))
            return (time.process_time() - started) / jobs * 1e6

    measure(False)  # warm up
    off = min(measure(False) for _ in range(3))
    on = min(measure(True) for _ in range(3))
    print(f"worker CPU per job: off {off:.1f} µs, metrics+tracing on {on:.1f} µs, added {on - off:.1f} µs/job")


if __name__ == "__main__":
    main()
