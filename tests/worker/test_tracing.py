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


@pytest.mark.parametrize("mode", [(), ("--async",)], ids=["threads", "async"])
def test_a_job_the_sampler_dropped_keeps_its_trace_context_and_records_no_span(worker, tmp_path, mode):
    # The providers here and in the worker sample as the SDK does by default, ParentBased:
    # a job enqueued under an unsampled request follows that decision end to end.
    spans = tmp_path / "spans.jsonl"
    worker("--concurrency", "2", *mode, env={"OJS_PROBE_SPANS": str(spans)})
    unsampled_request = trace.NonRecordingSpan(trace.SpanContext(
        trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736, span_id=0x00F067AA0BA902B7, is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT)))
    with trace.use_span(unsampled_request):
        dropped = django_ojs.enqueue("probe.trace_context")
    with trace.get_tracer("test").start_as_current_span("POST /signup"):
        kept = django_ojs.enqueue("probe.trace_context")

    # The producer span the sampler dropped is not exported, but its context is in meta (§5.1).
    producers = {span.attributes["ojs.job.id"] for span in EXPORTER.get_finished_spans()
                 if span.kind == trace.SpanKind.PRODUCER}
    assert producers == {str(kept.id)}
    version, trace_id, producer_span_id, flags = Job.objects.get(id=dropped.id).meta["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", "4bf92f3577b34da6a3ce929d0e0e4736", "00")

    wait_until(lambda: Job.objects.filter(id__in=[dropped.id, kept.id], state="completed").count() == 2,
               PATIENCE, "both jobs completed")
    # Its handler ran inside the dropped consumer span: the producer's trace, not sampled, not recorded...
    seen = Job.objects.get(id=dropped.id).result
    assert (seen["trace_id"], seen["sampled"], seen["recording"]) == (trace_id, False, False)
    assert seen["span_id"] != producer_span_id  # a span of its own, child of the producer's
    # ... and exported nothing, while the sampled job's consumer span was recorded (spans end before the ACK).
    exported = [json.loads(line) for line in spans.read_text().splitlines()] if spans.exists() else []
    consumers = {span["attributes"]["ojs.job.id"]: span for span in exported if span["kind"] == "CONSUMER"}
    assert set(consumers) == {str(kept.id)}
    assert Job.objects.get(id=kept.id).result["recording"] is True
    assert consumers[str(kept.id)]["span_id"] == Job.objects.get(id=kept.id).result["span_id"]
    assert consumers[str(kept.id)]["links"] == [Job.objects.get(id=kept.id).meta["traceparent"].split("-")[2]]


@pytest.mark.django_db
def test_a_sampler_is_given_the_queue_and_type_of_each_span_it_decides(monkeypatch):
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

    from django_ojs.observe import tracing

    class Recorder(Sampler):
        seen: list[tuple[str, dict]] = []

        def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                          trace_state=None):
            self.seen.append((name, dict(attributes or {})))
            return SamplingResult(Decision.DROP)

        def get_description(self):
            return "Recorder"

    monkeypatch.setattr(tracing, "_tracers", [TracerProvider(sampler=Recorder()).get_tracer("django_ojs")])
    job = django_ojs.enqueue("t.sampled", queue="mail")
    span = tracing.Consuming(Job.objects.get(id=job.id), "w1")
    span.finished(None)
    span.close()
    for (name, attributes), operation in zip(Recorder.seen, ("publish", "process"), strict=True):
        assert name == f"mail {'enqueue' if operation == 'publish' else operation}"
        assert attributes == {"messaging.system": "ojs", "messaging.operation.type": operation,
                              "messaging.destination.name": "mail", "ojs.job.queue": "mail",
                              "ojs.job.type": "t.sampled"}
    assert not span.span.is_recording()
