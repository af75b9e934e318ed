"""GET /ojs/v1/metrics: off by default (404), guarded by an API key, gauges read at scrape time."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_metrics_are_off_by_default(api):
    response = api.get("/ojs/v1/metrics")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "not_found" and 'OJS["METRICS"] = True' in error["message"]
    assert "metrics on" in error["hint"] and "job" not in error["hint"]  # not the hint of a job not found


def test_the_scrape_needs_a_key(client, ojs):
    ojs(METRICS=True)
    assert client.get("/ojs/v1/metrics").status_code == 401


def test_the_store_gauges_are_read_at_scrape_time(client, ojs, push):
    pytest.importorskip("prometheus_client")
    from django_ojs.models import ApiKey

    ojs(METRICS=True)
    for _ in range(3):
        push(type="m.job", options={"queue": "gauged"})
    _, key = ApiKey.objects.issue("scraper", ["read"])
    # Not the binding's media type: Prometheus' text format.
    response = client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200
    text = response.content.decode()
    assert 'ojs_queue_depth{queue="gauged",state="available"} 3.0' in text
    assert 'ojs_queue_oldest_available_age_seconds{queue="gauged"}' in text
    assert "# TYPE ojs_job_duration_seconds histogram" in text


def test_reads_of_a_result_are_counted_by_method_and_outcome(api, client, ojs, push):
    pytest.importorskip("prometheus_client")
    from django_ojs.core.types import Lease
    from django_ojs.models import ApiKey, Job

    ojs(METRICS=True)
    pushed = push(type="m.result", options={"queue": "results-counted"})
    [claimed] = Job.objects.fetch(["results-counted"], worker_id="w")
    _, key = ApiKey.objects.issue("scraper", ["read"])

    def counted(method: str, outcome: str) -> float:
        text = client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}").content.decode()
        line = f'ojs_result_retrieved_total{{method="{method}",outcome="{outcome}"}} '
        return next((float(row[len(line):]) for row in text.splitlines() if row.startswith(line)), 0.0)

    before = counted("poll", "active"), counted("wait", "timeout"), counted("poll", "completed")
    assert api.get(f"/ojs/v1/jobs/{pushed.id}/result").status_code == 200
    assert api.get(f"/ojs/v1/jobs/{pushed.id}/result?wait=true&timeout=0").status_code == 408
    Job.objects.ack(claimed.id, result=1, lease=Lease("w"))
    assert api.get(f"/ojs/v1/jobs/{pushed.id}/result?wait=true").status_code == 200  # ended: answered at once
    after = counted("poll", "active"), counted("wait", "timeout"), counted("poll", "completed")
    assert [b - a for a, b in zip(before, after)] == [1, 1, 1]


def test_a_gauge_says_how_many_reapers_tick(client, ojs):
    pytest.importorskip("prometheus_client")
    from django_ojs.core import maintenance
    from django_ojs.models import ApiKey

    ojs(METRICS=True)
    _, key = ApiKey.objects.issue("scraper", ["read"])

    def scraped() -> str:
        return client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}").content.decode()

    assert "\nojs_reapers_ticking 0.0\n" in scraped()  # an alert rule can fire on it: no reaper, nothing comes due
    maintenance.record_reaper_tick("reaper-1", "host", 1)
    assert "\nojs_reapers_ticking 1.0\n" in scraped()
