"""OpenTelemetry spans (ojs-observability §5-§7), with ``OJS["TRACING"]`` on and the ``otel`` extra.

- **Producer span** ``{queue} enqueue`` (kind PRODUCER) around each job's
  enqueue, from Python (``enqueue``/``enqueue_many``) and HTTP (PUSH, batch
  PUSH); its W3C context goes into the job's ``meta`` as ``traceparent``
  (and ``tracestate``), §5.1.
- **Consumer span** ``{queue} process`` (kind CONSUMER) around each
  execution in the Python worker, a *child* of the producer span and also
  *linked* to it (§5.2 asks for the link; the child relation puts enqueue and
  execution in one trace, which is what an operator opens: README
  "Decisions").

The project configures the OpenTelemetry SDK (provider, exporter) as for any
library; django-ojs only uses the API. With TRACING off nothing here imports
``opentelemetry``: the call sites test a setting and go on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

TRACER_NAME = "django_ojs"
_CARRIER_KEYS = ("traceparent", "tracestate")


_tracers: list[Any] = []


def _tracer() -> Any:
    """The API's tracer, fetched once: a proxy until the project sets its provider, then that one's."""
    if not _tracers:
        from opentelemetry import trace

        from . import __version__

        _tracers.append(trace.get_tracer(TRACER_NAME, __version__))
    return _tracers[0]


def _common(queue: str, job_type: str, operation: str) -> dict[str, Any]:
    return {
        "messaging.system": "ojs",
        "messaging.operation.type": operation,
        "messaging.destination.name": queue,
        "ojs.job.queue": queue,
        "ojs.job.type": job_type,
    }


def traced_push(specs: Sequence[Any], push: Callable[[], Sequence[Any]]) -> Any:
    """``push()`` (which stores ``specs``), inside their producer spans when tracing is on."""
    from .conf import ojs_settings

    if not ojs_settings.TRACING:
        return push()
    with producing(specs) as stored:
        jobs = push()
        stored(jobs)
        return jobs


@contextlib.contextmanager
def producing(specs: Sequence[Any]) -> Iterator[Callable[[Sequence[Any]], None]]:
    """One PRODUCER span per job spec, its context injected into the spec's ``meta``.

    Yields ``stored(jobs)``, to call with what was stored: the spans get the
    ids and states. An exception ends them with status ERROR.
    """
    from opentelemetry import trace
    from opentelemetry.propagate import inject
    from opentelemetry.trace import SpanKind, Status, StatusCode

    tracer = _tracer()
    spans = []
    for spec in specs:
        span = tracer.start_span(f"{spec.queue} enqueue", kind=SpanKind.PRODUCER,
                                 attributes=_common(spec.queue, spec.type, "publish"))
        if spec.id is not None:
            span.set_attribute("ojs.job.id", str(spec.id))
        carrier: dict[str, str] = {}
        inject(carrier, context=trace.set_span_in_context(span))
        spec.meta = {**spec.meta, **{key: carrier[key] for key in _CARRIER_KEYS if key in carrier}}
        spans.append(span)

    def stored(jobs: Sequence[Any]) -> None:
        for span, job in zip(spans, jobs):
            if job is None:
                continue  # dropped by enqueue middleware
            span.set_attribute("ojs.job.id", str(job.id))
            span.set_attribute("messaging.message.id", str(job.id))
            span.set_attribute("ojs.job.state", job.state)
            span.set_attribute("ojs.job.priority", job.priority)

    try:
        yield stored
    except BaseException as exc:
        for span in spans:
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            span.set_attribute("error.type", type(exc).__name__)
            span.end()
        raise
    for span in spans:
        span.set_status(Status(StatusCode.OK))
        span.end()


class _Otel:
    """The API's names, imported once on first use (a per-job import statement costs a microsecond each)."""

    loaded = False

    @classmethod
    def load(cls) -> type[_Otel]:
        if not cls.loaded:
            from opentelemetry import context, trace
            from opentelemetry.propagate import extract
            from opentelemetry.trace import Link, SpanKind, Status, StatusCode

            cls.context, cls.trace, cls.extract, cls.Link = context, trace, extract, Link
            cls.CONSUMER, cls.Status, cls.ERROR = SpanKind.CONSUMER, Status, StatusCode.ERROR
            cls.OK = Status(StatusCode.OK)  # immutable: one for every span
            cls.loaded = True
        return cls

    context: Any
    trace: Any
    extract: Any
    Link: Any
    CONSUMER: Any
    Status: Any
    ERROR: Any
    OK: Any


class Consuming:
    """The CONSUMER span of one execution, current from ``open`` to ``close``.

    A plain object rather than nested generator context managers
    (``start_as_current_span`` inside a ``contextmanager`` inside the
    worker's own): the SDK's span is the cost of tracing, not the wrapping
    around it.
    """

    __slots__ = ("_token", "attempt", "span")

    def __init__(self, job: Any, worker_id: str):
        otel = _Otel.load()
        meta = job.meta if isinstance(job.meta, dict) else {}
        carrier = {key: meta[key] for key in _CARRIER_KEYS if isinstance(meta.get(key), str)}
        parent = otel.extract(carrier) if carrier else None
        producer = otel.trace.get_current_span(parent).get_span_context() if parent is not None else None
        job_id = str(job.id)
        self.attempt = job.attempt
        self.span = _tracer().start_span(
            f"{job.queue} process", context=parent, kind=otel.CONSUMER,
            links=[otel.Link(producer)] if producer is not None and producer.is_valid else None,
            attributes={
                **_common(job.queue, job.type, "process"),
                "ojs.job.id": job_id, "messaging.message.id": job_id,
                "ojs.job.attempt": job.attempt, "ojs.job.priority": job.priority, "ojs.worker.id": worker_id,
            },
            record_exception=False, set_status_on_exception=False,
        )
        self._token = otel.context.attach(otel.trace.set_span_in_context(self.span))

    def finished(self, failure: Any) -> None:
        """How the execution ended: ``None``, or its ``Failure``."""
        span = self.span
        if failure is None:
            span.set_attribute("ojs.job.state", "completed")
            span.set_status(_Otel.OK)
            return
        span.set_status(_Otel.Status(_Otel.ERROR, failure.message))
        span.set_attributes({"error.type": failure.type, "error.message": failure.message,
                             "ojs.job.error.attempt": self.attempt})

    def close(self) -> None:
        _Otel.context.detach(self._token)
        self.span.end()


@contextlib.contextmanager
def consuming(job: Any, worker_id: str) -> Iterator[Callable[[Any], None]]:
    """The CONSUMER span of one execution; yields ``finished(failure_or_None)``."""
    span = Consuming(job, worker_id)
    try:
        yield span.finished
    finally:
        span.close()
