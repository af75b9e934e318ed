"""OpenTelemetry: the producer span's context rides in meta; the consumer span in a real
ojs_worker process is its child (and linked to it), with the attributes of ojs-observability §7."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opentelemetry.sdk")
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import django_ojs
from django_ojs.models import Job
from tests.worker.conftest import PATIENCE, wait_until

pytestmark = pytest.mark.postgres
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider():
    # The global provider can be set once per process; this module's spans go to EXPORTER.
    ours = TracerProvider()
    ours.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(ours)
    if trace.get_tracer_provider() is not ours:
        trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(EXPORTER))
    return ours


@pytest.fixture(autouse=True)
def tracing_on(ojs, monkeypatch):
    EXPORTER.clear()
    ojs(TRACING=True)
    monkeypatch.setenv("OJS_TRACING", "true")


@pytest.mark.parametrize("mode", [(), ("--async",)], ids=["threads", "async"])
def test_the_consumer_span_in_a_real_worker_is_the_producer_spans_child(worker, tmp_path, mode):
    spans = tmp_path / "spans.jsonl"
    worker("--concurrency", "2", *mode, env={"OJS_PROBE_SPANS": str(spans)})
    with trace.get_tracer("test").start_as_current_span("POST /signup"):
        ok = django_ojs.enqueue("probe.noop")
        bad = django_ojs.enqueue("probe.explode", ["boom"], retry={"max_attempts": 1})
    producers = {span.attributes["ojs.job.id"]: span for span in EXPORTER.get_finished_spans()
                 if span.kind == trace.SpanKind.PRODUCER}
    producer = producers[str(ok.id)]
    assert producer.name == "default enqueue"
    assert producer.attributes["messaging.operation.type"] == "publish"
    assert producer.attributes["messaging.system"] == "ojs"
    traceparent = Job.objects.get(id=ok.id).meta["traceparent"]
    assert traceparent.startswith(f"00-{producer.context.trace_id:032x}-{producer.context.span_id:016x}-")

    def consumers() -> dict[str, dict]:
        lines = spans.read_text().splitlines() if spans.exists() else []
        found = [json.loads(line) for line in lines]
        return {s["attributes"]["ojs.job.id"]: s for s in found if s["kind"] == "CONSUMER"}

    done = wait_until(lambda: len(c := consumers()) == 2 and c, PATIENCE, "both consumer spans exported")
    consumer = done[str(ok.id)]
    assert consumer["name"] == "default process"
    assert consumer["trace_id"] == f"{producer.context.trace_id:032x}"
    assert consumer["parent_span_id"] == f"{producer.context.span_id:016x}"
    assert consumer["links"] == [f"{producer.context.span_id:016x}"]
    assert consumer["status"] == "OK"
    attributes = consumer["attributes"]
    assert (attributes["messaging.operation.type"], attributes["messaging.destination.name"],
            attributes["ojs.job.type"], attributes["ojs.job.attempt"]) == ("process", "default", "probe.noop", 1)
    assert attributes["ojs.worker.id"]
    failed = done[str(bad.id)]
    assert failed["parent_span_id"] == f"{producers[str(bad.id)].context.span_id:016x}"
    assert (failed["status"], failed["attributes"]["error.type"]) == ("ERROR", "ProbeError")


def test_http_push_has_its_producer_span_too(api):
    response = api.post("/ojs/v1/jobs", {"type": "t.http", "args": [], "options": {"queue": "web"}})
    assert response.status_code == 201
    job_id = response.json()["job"]["id"]
    [span] = [s for s in EXPORTER.get_finished_spans() if s.kind == trace.SpanKind.PRODUCER]
    assert (span.name, span.attributes["ojs.job.id"]) == ("web enqueue", job_id)
    assert Job.objects.get(id=job_id).meta["traceparent"].split("-")[2] == f"{span.context.span_id:016x}"
