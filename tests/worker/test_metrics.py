"""Prometheus metrics with jobs flowing through real ojs_worker processes, scraped over real HTTP.

gunicorn serves the API and the scrape; two ``ojs_worker`` processes run the
jobs; all three share one PROMETHEUS_MULTIPROC_DIR, as a host's processes do.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from django_ojs.models import ApiKey, Job
from tests.api.gunicorn import serving
from tests.worker.conftest import PATIENCE, wait_until

pytestmark = pytest.mark.postgres


def scrape(wire) -> dict[tuple[str, tuple], float]:
    status, headers, body = wire.send("GET", "/ojs/v1/metrics", headers={
        "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"})
    assert status == 200, body
    assert headers["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_a_scrape_counts_what_real_workers_did(worker, reaper, monkeypatch, tmp_path):
    directory = tmp_path / "prometheus"
    directory.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    monkeypatch.setenv("OJS_METRICS", "true")
    _, key = ApiKey.objects.issue("scraper", ["admin"])
    with serving(key) as wire:
        status, _, body = wire.send("GET", "/ojs/v1/metrics", key=False)
        assert status == 401, body
        worker("--concurrency", "3", "--queue", "metrics")
        # The async mode observes its executions through the same wrapper as the threaded one.
        worker("--concurrency", "3", "--queue", "metrics", "--async")
        reaper()  # promotes the retried job's second attempt
        wanted = [("probe.noop", [], 1)] * 6 + [("probe.explode", ["boom"], 1)] * 2 + [("probe.explode", ["again"], 2)]
        for kind, args, attempts in wanted:
            status, _, body = wire.send("POST", "/ojs/v1/jobs", {
                "type": kind, "args": args,
                "options": {"queue": "metrics", "retry": {"max_attempts": attempts, "initial_interval": "PT0.01S"}},
            })
            assert status == 201, body
        # A waiting job, for the depth and the oldest-job gauges.
        status, _, body = wire.send("POST", "/ojs/v1/jobs", {"type": "probe.noop", "args": [], "options": {"queue": "idle"}})
        assert status == 201, body

        def finished() -> bool:
            return Job.objects.filter(queue="metrics", state__in=["completed", "discarded"]).count() == len(wanted)

        wait_until(finished, PATIENCE, "every job finished")
        samples = wait_until(
            lambda: (s := scrape(wire)) and value(s, "ojs_job_completed_total", queue="metrics", type="probe.noop") == 6
            and value(s, "ojs_job_failed_total", queue="metrics", type="probe.explode") == 3
            # The workers write their histograms once a second (METRICS_FLUSH_INTERVAL).
            and value(s, "ojs_job_duration_seconds_count", queue="metrics", type="probe.noop", state="completed") == 6
            and value(s, "ojs_job_duration_seconds_count", queue="metrics", type="probe.explode", state="failed") == 4
            and s,
            PATIENCE, "the workers' completions in the scrape",
        )
    noop = {"queue": "metrics", "type": "probe.noop"}
    explode = {"queue": "metrics", "type": "probe.explode"}
    assert value(samples, "ojs_job_enqueued_total", **noop) == 6  # counted by gunicorn's process
    assert value(samples, "ojs_job_enqueued_total", **explode) == 3
    assert value(samples, "ojs_job_retried_total", **explode) == 1
    assert value(samples, "ojs_job_attempt_failed_total", **explode) == 4
    assert value(samples, "ojs_job_duration_seconds_count", **noop, state="completed") == 6
    assert value(samples, "ojs_job_duration_seconds_count", **explode, state="failed") == 4
    assert value(samples, "ojs_job_queue_time_seconds_count", **noop) == 6
    assert value(samples, "ojs_queue_depth", queue="metrics", state="completed") == 6
    assert value(samples, "ojs_queue_depth", queue="metrics", state="discarded") == 3
    assert value(samples, "ojs_queue_depth", queue="idle", state="available") == 1
    assert value(samples, "ojs_queue_oldest_available_age_seconds", queue="idle") >= 0
    assert value(samples, "ojs_workers_active") == 2
    assert value(samples, "ojs_workers", state="running") == 2
    assert json.dumps(sorted({name for name, _ in samples}))  # every family parsed


def test_job_types_past_the_label_bound_count_as_other(transactional_db, monkeypatch):
    """Job types are the clients' to choose: each new one was new series in every counter, for the
    life of the process. Past MAX_LABEL_VALUES a process counts them under one label."""
    from django_ojs.observe.metrics import MAX_LABEL_VALUES, OTHER

    monkeypatch.setenv("OJS_METRICS", "true")
    _, key = ApiKey.objects.issue("scraper", ["admin"])
    with serving(key) as wire:
        kinds = [f"probe.kind{index}" for index in range(MAX_LABEL_VALUES + 200)]
        for start in range(0, len(kinds), 500):
            status, _, body = wire.send("POST", "/ojs/v1/jobs/batch", {"jobs": [
                {"type": kind, "args": [], "options": {"queue": "labels"}} for kind in kinds[start:start + 500]]})
            assert status == 201, body[:300]
        samples = scrape(wire)
    enqueued = {dict(labels)["type"]: count for (name, labels), count in samples.items()
                if name == "ojs_job_enqueued_total" and dict(labels).get("queue") == "labels"}
    assert len(enqueued) <= MAX_LABEL_VALUES + 1
    assert enqueued[OTHER] >= 200
    assert sum(enqueued.values()) == len(kinds)  # every job counted, under its type or OTHER


def test_checkpoint_sizes_of_types_past_the_label_bound_count_as_other():
    """The checkpoint-size histogram is labelled by job type too: bounded as the counters are."""
    from django_ojs.observe.metrics import CHECKPOINT_SIZE, COUNTING, MAX_LABEL_VALUES, OTHER

    kinds = [f"probe.checkpoint{index}" for index in range(MAX_LABEL_VALUES + 200)]
    for kind in kinds:
        COUNTING.measure("checkpoint_size_bytes", (kind,), 100)
    labelled = {sample.labels["job_type"] for metric in CHECKPOINT_SIZE.collect() for sample in metric.samples
                if sample.name.endswith("_count")}
    assert len(labelled) <= MAX_LABEL_VALUES + 1
    assert OTHER in labelled
