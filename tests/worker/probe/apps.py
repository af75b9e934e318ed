import json
import os

from django.apps import AppConfig


class ProbeConfig(AppConfig):
    name = "tests.worker.probe"
    label = "ojs_probe"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # tests/core/test_signals.py: a process started with OJS_PROBE_SIGNALS
        # appends every signal it sends to that file, one JSON line each.
        path = os.environ.get("OJS_PROBE_SIGNALS")
        if path:
            from django_ojs.observe.signals import ojs_event, worker_died

            def write(line: dict) -> None:
                with open(path, "a") as log:
                    log.write(json.dumps(line) + "\n")

            def on_event(sender, event, **kwargs):
                write({"signal": "ojs_event", "type": event.type, "job_id": str(event.job_id or ""),
                       "id": str(event.id), "pid": os.getpid(), "data": event.data})

            def on_death(sender, event, **kwargs):
                write({"signal": "worker_died", "type": event.type, "worker_id": event.data["worker_id"],
                       "id": str(event.id), "pid": os.getpid()})

            ojs_event.connect(on_event, weak=False)
            worker_died.connect(on_death, weak=False)

        # tests/worker/test_tracing.py: a process started with OJS_PROBE_SPANS
        # exports its finished spans to that file, one JSON line each.
        spans = os.environ.get("OJS_PROBE_SPANS")
        if spans:
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

            class FileExporter(SpanExporter):
                def export(self, batch):
                    lines = [json.dumps({
                        "name": span.name, "kind": span.kind.name, "pid": os.getpid(),
                        "trace_id": f"{span.context.trace_id:032x}", "span_id": f"{span.context.span_id:016x}",
                        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
                        "links": [f"{link.context.span_id:016x}" for link in span.links],
                        "status": span.status.status_code.name, "attributes": dict(span.attributes),
                    }) for span in batch]
                    with open(spans, "a") as out:
                        out.write("".join(line + "\n" for line in lines))
                    return SpanExportResult.SUCCESS

            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
            trace.set_tracer_provider(provider)
