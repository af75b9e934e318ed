"""OpenTelemetry spans (ojs-observability §5-§7), with ``OJS["TRACING"]`` on and the ``otel`` extra.

- **Producer span** ``{queue} enqueue`` (kind PRODUCER) around each job's
  enqueue, from Python (``enqueue``/``enqueue_many``) and HTTP (PUSH, batch
  PUSH); its W3C context goes into the job's ``meta`` as ``traceparent``
  (and ``tracestate``), §5.1.
- **Consumer span** ``{queue} process`` (kind CONSUMER) around each
  execution in the Python worker, a *child* of the producer span and also
  *linked* to it (§5.2 asks for the link; the child relation puts enqueue and
  execution in one trace, which is what an operator opens:
  docs/explanation/decisions.md).

The project configures the OpenTelemetry SDK (provider, exporter, sampler) as
for any library; django-ojs only uses the API. With TRACING off nothing here
imports ``opentelemetry``: the call sites test a setting and go on.

A span the sampler drops (a non-recording span: most of them, at a
production sampling rate) costs us what the spec requires and no more: its
context is still made current around the handler and, for a producer span,
still written as ``traceparent`` into ``meta`` -- the consumer then follows
the producer's decision -- but no per-job attribute, link or status is built
for it. The attributes given at creation, which a sampler may read (the
messaging conventions' "sampling relevant" ones and the job's queue and
type), are one cached mapping per (queue, type).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ..conf import ojs_settings
from ..version import __version__

TRACER_NAME = "django_ojs"

_tracers: list[Any] = []


def _tracer() -> Any:
    """The API's tracer, fetched once: a proxy until the project sets its provider, then that one's."""
    if not _tracers:
        from opentelemetry import trace  # the "otel" extra, only with tracing on

        _tracers.append(trace.get_tracer(TRACER_NAME, __version__))
    return _tracers[0]


class _Otel:
    """The API's names, imported once on first use (a per-job import statement costs a microsecond each)."""

    loaded = False

    @classmethod
    def load(cls) -> type[_Otel]:
        if not cls.loaded:
            from opentelemetry import context, trace
            from opentelemetry.trace import SpanKind, Status, StatusCode
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

            cls.attach, cls.detach = context.attach, context.detach
            cls.in_context, cls.current_span = trace.set_span_in_context, trace.get_current_span
            # meta carries W3C Trace Context whatever the project's global propagators
            # (§5.1): its own two fields, nothing to filter out, no baggage to extract.
            cls.w3c = TraceContextTextMapPropagator()
            cls.PRODUCER, cls.CONSUMER = SpanKind.PRODUCER, SpanKind.CONSUMER
            cls.Status, cls.ERROR = Status, StatusCode.ERROR
            cls.OK = Status(StatusCode.OK)  # immutable: one for every span
            cls.loaded = True
        return cls

    attach: Any
    detach: Any
    in_context: Any
    current_span: Any
    w3c: Any
    PRODUCER: Any
    CONSUMER: Any
    Status: Any
    ERROR: Any
    OK: Any


# (queue, job type, operation) -> the span's name and its creation attributes.
_described: dict[tuple[str, str, str], tuple[str, Mapping[str, Any]]] = {}
# Queues and types come from clients (HTTP PUSH): past this many kinds, start over.
_MAX_DESCRIBED = 10_000


def _description(queue: str, job_type: str, operation: str) -> tuple[str, Mapping[str, Any]]:
    """A span's name and the attributes it is created with, shared by every job of its queue and type.

    Read-only (a sampler is handed the mapping itself; the SDK copies it into
    a recording span).
    """
    key = (queue, job_type, operation)
    found = _described.get(key)
    if found is None:
        if len(_described) >= _MAX_DESCRIBED:
            _described.clear()
        found = _described[key] = (f"{queue} {'enqueue' if operation == 'publish' else operation}", MappingProxyType({
            "messaging.system": "ojs",
            "messaging.operation.type": operation,
            "messaging.destination.name": queue,
            "ojs.job.queue": queue,
            "ojs.job.type": job_type,
        }))
    return found


def traced_push(specs: Sequence[Any], push: Callable[[], Sequence[Any]]) -> Any:
    """``push()`` (which stores ``specs``), inside their producer spans when tracing is on."""
    if not ojs_settings.TRACING:
        return push()
    with producing(specs) as stored:
        jobs = push()
        stored(jobs)
        return jobs


@contextlib.contextmanager
def producing(specs: Sequence[Any]) -> Iterator[Callable[[Sequence[Any]], None]]:
    """One PRODUCER span per job spec, its context injected into the spec's ``meta``.

    Yields ``stored(jobs)``, to call with what was stored: the recording spans
    get the ids and states. An exception ends them with status ERROR.
    """
    otel = _Otel.load()
    tracer = _tracer()
    recording: list[tuple[int, Any]] = []  # (position in specs, span): the spans the sampler kept
    for position, spec in enumerate(specs):
        name, attributes = _description(spec.queue, spec.type, "publish")
        span = tracer.start_span(name, kind=otel.PRODUCER, attributes=attributes)
        # Sampled or not, the job carries its context: its consumer follows the decision.
        carrier: dict[str, str] = {}
        otel.w3c.inject(carrier, context=otel.in_context(span))
        spec.meta = {**spec.meta, **carrier}
        if span.is_recording():
            if spec.id is not None:
                span.set_attribute("ojs.job.id", str(spec.id))
            recording.append((position, span))
        # A dropped span is the API's NonRecordingSpan: nothing to describe, nothing to end.

    def stored(jobs: Sequence[Any]) -> None:
        for position, span in recording:
            job = jobs[position]
            if job is None:
                continue  # dropped by enqueue middleware
            job_id = str(job.id)
            span.set_attributes({"ojs.job.id": job_id, "messaging.message.id": job_id,
                                 "ojs.job.state": job.state, "ojs.job.priority": job.priority})

    try:
        yield stored
    except BaseException as exc:
        for _, span in recording:
            span.set_status(otel.Status(otel.ERROR, str(exc)))
            span.set_attribute("error.type", type(exc).__name__)
            span.end()
        raise
    for _, span in recording:
        span.set_status(otel.OK)
        span.end()


def _remote_parent(meta: Any) -> Any:
    """The producer's context from a job's ``meta`` (a Context), or None when it carries none."""
    if not isinstance(meta, dict):
        return None
    traceparent = meta.get("traceparent")
    if not isinstance(traceparent, str):
        return None
    tracestate = meta.get("tracestate")
    carrier = {"traceparent": traceparent}
    if isinstance(tracestate, str):
        carrier["tracestate"] = tracestate
    return _Otel.w3c.extract(carrier)


class Consuming:
    """The CONSUMER span of one execution, current from ``open`` to ``close``.

    A plain object rather than nested generator context managers
    (``start_as_current_span`` inside a ``contextmanager`` inside the
    worker's own): the SDK's span is the cost of tracing, not the wrapping
    around it. A span the sampler dropped is only made current (the
    handler's own spans and calls carry its trace and its decision).
    """

    __slots__ = ("_token", "attempt", "recording", "span")

    def __init__(self, job: Any, worker_id: str):
        otel = _Otel.load()
        parent = _remote_parent(job.meta)
        name, attributes = _description(job.queue, job.type, "process")
        # No links at creation: the only one is to the parent, which the sampler is given anyway.
        span = self.span = _tracer().start_span(name, context=parent, kind=otel.CONSUMER, attributes=attributes,
                                                record_exception=False, set_status_on_exception=False)
        self.recording = span.is_recording()
        if self.recording:
            self._describe(job, worker_id, parent)
        self._token = otel.attach(otel.in_context(span))

    def _describe(self, job: Any, worker_id: str, parent: Any) -> None:
        """What only a recorded span carries: the job's own attributes and the link to its producer."""
        job_id = str(job.id)
        self.attempt = job.attempt
        self.span.set_attributes({"ojs.job.id": job_id, "messaging.message.id": job_id,
                                  "ojs.job.attempt": job.attempt, "ojs.job.priority": job.priority,
                                  "ojs.worker.id": worker_id})
        if parent is not None:
            producer = _Otel.current_span(parent).get_span_context()
            if producer.is_valid:
                self.span.add_link(producer)

    def finished(self, failure: Any) -> None:
        """How the execution ended: ``None``, or its ``Failure``."""
        if not self.recording:
            return
        span = self.span
        if failure is None:
            span.set_attribute("ojs.job.state", "completed")
            span.set_status(_Otel.OK)
            return
        span.set_status(_Otel.Status(_Otel.ERROR, failure.message))
        span.set_attributes({"error.type": failure.type, "error.message": failure.message,
                             "ojs.job.error.attempt": self.attempt})

    def close(self) -> None:
        _Otel.detach(self._token)
        if self.recording:
            self.span.end()


@contextlib.contextmanager
def consuming(job: Any, worker_id: str) -> Iterator[Callable[[Any], None]]:
    """The CONSUMER span of one execution; yields ``finished(failure_or_None)``."""
    span = Consuming(job, worker_id)
    try:
        yield span.finished
    finally:
        span.close()
