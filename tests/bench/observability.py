"""The CPU cost per job of metrics and tracing in the worker, measured in-process without noise.

    PROMETHEUS_MULTIPROC_DIR=$(mktemp -d) python -m tests.bench.observability [--jobs 20000]

The suite's ``--observability`` runs measure throughput end to end (off and
on interleaved, medians); on a busy 2-core machine two runs of one mode still
differ by several per cent. This measures what metrics and tracing add per
job on the worker's CPU, which is the part that costs throughput: the
execution wrapper (consumer span, duration and queue-time histograms) and,
per job, its two committed events (started, completed) counted: told to
the metrics as (queue, type) pairs, as the fast statements do when no
signal receiver is connected (``signals.count_after_commit``). Prints microseconds per job for each
mode, the lowest of a few rounds; compare with the worker's CPU per job
(1 / jobs/s per core busy) from the suite.

Modes: off; metrics; tracing with every span recorded (an SDK pipeline
exporting nowhere); the same span made by bare SDK calls with the same
inputs, in place of ours (tracing minus this is our own cost); both; both with the sampler a project would use to trace
a fraction of jobs, ``ParentBased(TraceIdRatioBased(0.1))``, on jobs whose
producer span was not sampled (flags 00) and on root jobs (no
``traceparent``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
import uuid

import django

# A producer span that was sampled (01), and one that was not (00).
_SAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
_UNSAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1,
                        help="jobs whose events one fast statement hands on together (a worker turn's; default 1, "
                             "the worst case)")
    parser.add_argument("--mode", action="append", help="measure only this mode (repeatable; to profile one)")
    options = parser.parse_args()
    jobs = options.jobs
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.bench.settings")
    os.environ.setdefault("DATABASE_URL", "sqlite:///:memory:")
    os.environ["OJS_BENCH_OTEL_SDK"] = "1"
    django.setup()
    from django.test import override_settings
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    from django_ojs.core.pg import events
    from django_ojs.handlers.context import JobContext
    from django_ojs.handlers.registry import registry
    from django_ojs.models import Job
    from django_ojs.observe import signals, tracing
    from django_ojs.worker.execution import Execution, Runner

    now = dt.datetime.now(dt.UTC)
    registry.register("bench.obs.noop", lambda ctx: None)
    recording = trace.get_tracer_provider()
    sampled_tenth = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.1)))
    sampled_tenth.add_span_processor(recording._active_span_processor)  # type: ignore[attr-defined]

    def executions(traceparent: str | None):
        for _ in range(jobs):
            job = Job(id=uuid.uuid4(), type="bench.obs.noop", queue="default", args=[],
                      meta={"traceparent": traceparent} if traceparent else {},
                      priority=0, attempt=1, enqueued_at=now, started_at=now)
            yield Execution(job=job, ctx=JobContext(job, "w1", lambda: None), lease=None, deadline=None)

    def event_rows(kind: str) -> tuple:
        job_id = uuid.uuid4()
        return (None, uuid.uuid4(), kind, now, job_id, "default", {
            "job_id": str(job_id), "job_type": "bench.obs.noop", "queue": "default", "state": "x", "attempt": 1})

    class BareSdkSpan:
        """The consumer span as a bare SDK call given the same inputs (extract, name, every attribute,
        the link, status, current around the handler): what tracing costs with none of our code."""

        def __init__(self, job, worker_id):
            from opentelemetry import context
            from opentelemetry.trace import Link, SpanKind
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

            parent = TraceContextTextMapPropagator().extract({"traceparent": job.meta["traceparent"]})
            self.span = tracing._tracers[0].start_span(
                "default process", context=parent, kind=SpanKind.CONSUMER,
                links=[Link(trace.get_current_span(parent).get_span_context())],
                attributes={"messaging.system": "ojs", "messaging.operation.type": "process",
                            "messaging.destination.name": "default", "ojs.job.queue": "default",
                            "ojs.job.type": job.type, "ojs.job.id": str(job.id), "messaging.message.id": str(job.id),
                            "ojs.job.attempt": job.attempt, "ojs.job.priority": job.priority,
                            "ojs.worker.id": worker_id},
                record_exception=False, set_status_on_exception=False)
            self.token = context.attach(trace.set_span_in_context(self.span))

        def finished(self, failure):
            from opentelemetry.trace import Status, StatusCode

            self.span.set_attribute("ojs.job.state", "completed")
            self.span.set_status(Status(StatusCode.OK))

        def close(self):
            from opentelemetry import context

            context.detach(self.token)
            self.span.end()

    def measure(metrics: bool, traced: bool, provider: object = recording, traceparent: str | None = _SAMPLED,
                bare_sdk: bool = False) -> float:
        from django_ojs.observe import metrics as metrics_module

        with override_settings(OJS={"METRICS": metrics, "TRACING": traced}):
            tracing._tracers[:] = [provider.get_tracer(tracing.TRACER_NAME)]  # type: ignore[attr-defined]
            if metrics:
                metrics_module.enable()
            runner = Runner(registry, [], omit_backtraces=False)
            if bare_sdk:
                runner.observed.consumer = BareSdkSpan
            batch = list(executions(traceparent))
            size = options.batch
            started_rows = [event_rows("job.started") for _ in range(size)]
            completed_rows = [event_rows("job.completed") for _ in range(size)]
            pairs = [("default", "bench.obs.noop")] * size
            started = time.process_time()
            for number, execution in enumerate(batch, 1):
                runner(execution)
                if number % size != 0:
                    continue
                if metrics:
                    metrics_module.flush_observations()  # per batch: more often than the worker's loop (1/s)
                # The jobs' two committed events each, as the fast statements hand them on:
                # whole rows to receivers, (queue, type) pairs to the counters otherwise.
                if signals.wanted():
                    events.send_returned(started_rows)
                    events.send_returned(completed_rows)
                elif signals.counting():
                    signals.count_after_commit("job.started", pairs)
                    signals.count_after_commit("job.completed", pairs)
            spent = time.process_time() - started
            metrics_module.disable()
            return spent / jobs * 1e6

    runs = {
        "off": lambda: measure(False, False),
        "metrics": lambda: measure(True, False),
        "tracing": lambda: measure(False, True),
        "tracing, the SDK alone (same inputs, none of our code)": lambda: measure(False, True, bare_sdk=True),
        "metrics+tracing": lambda: measure(True, True),
        "metrics+tracing 10% sampled": lambda: measure(True, True, sampled_tenth, None),
        "metrics+tracing 10% sampled, producer unsampled": lambda: measure(True, True, sampled_tenth, _UNSAMPLED),
    }
    runs = {name: run for name, run in runs.items() if name == "off" or name in (options.mode or runs)}
    for run in runs.values():
        run()  # warm up
    best = {name: min(run() for _ in range(options.rounds)) for name, run in runs.items()}
    print(f"worker CPU per job ({jobs:,} no-op jobs, events handed on {options.batch} jobs at a time, "
          f"best of {options.rounds}):")
    for name, micros in best.items():
        added = "" if name == "off" else f"  (+{micros - best['off']:.1f} µs/job)"
        print(f"  {name:<56} {micros:7.1f} µs{added}")


if __name__ == "__main__":
    main()
