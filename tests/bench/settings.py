"""The example project as the suite runs it: its settings, plus a bare JSON view (tests/bench/urls.py).

Same middleware, same database settings (``CONN_MAX_AGE``), events on: the
bare view is the floor every OJS endpoint is compared with.
"""

import os

from example_project.settings import *

ROOT_URLCONF = "tests.bench.urls"

if os.environ.get("OJS_BENCH_OTEL_SDK"):
    # --observability: a real SDK pipeline (spans recorded, batched, exported)
    # whose exporter drops them, so the figure is the cost of tracing itself.
    # "1" records every span; a fraction such as "0.1" samples that share of
    # traces as a production project would (ParentBased(TraceIdRatioBased)).
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    class _Nowhere(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    _share = float(os.environ["OJS_BENCH_OTEL_SDK"])
    _provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(_share))) if _share < 1 else TracerProvider()
    _provider.add_span_processor(BatchSpanProcessor(_Nowhere()))
    trace.set_tracer_provider(_provider)
DEBUG = False

if os.environ.get("OJS_BENCH_UNPREPARED"):
    # The hot statements unprepared, as before core/prepared.py: for A/B runs of the suite.
    OJS = {**OJS, "PREPARED_STATEMENTS": False}

if os.environ.get("OJS_BENCH_EVENTS_OFF"):
    # The event store off: for A/B runs that measure what events cost (tests/bench/ab.py events).
    OJS = {**OJS, "EVENTS": False}
