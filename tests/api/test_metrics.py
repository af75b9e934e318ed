"""GET /ojs/v1/metrics: off by default (404), guarded by an API key, gauges read at scrape time."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_metrics_are_off_by_default(api):
    response = api.get("/ojs/v1/metrics")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


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
