"""One meaning for a durable job's checkpoint and steps on every surface (docs/how-to/durable-jobs.md).

A job whose first attempt checkpointed, recorded a step and failed, and whose retry recorded
another: the HTTP job record and the retry's FETCH, the admin API, the admin's job page, the
CLI's text and JSON, the events and the metrics must say the same steps, with the same
attempts and times, and the same checkpoint.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from django_ojs.models import ApiKey, Event, Job
from tests.helpers import ago

pytestmark = pytest.mark.django_db(transaction=True)


def ojs_command(*args: str) -> str:
    out = io.StringIO()
    call_command("ojs", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


SERIES = (
    'ojs_job_steps_completed_total{queue="durable-agree",type="order.fulfil"}',
    'ojs_progress_checkpoint_size_bytes_count{job_type="order.fulfil"}',
    'ojs_progress_checkpoint_size_bytes_sum{job_type="order.fulfil"}',
)


def scrape(client, key: str) -> list[float]:
    scraped = client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}").content.decode()
    values = dict(line.rsplit(" ", 1) for line in scraped.splitlines() if line and not line.startswith("#"))
    return [float(values.get(series, 0.0)) for series in SERIES]


@pytest.fixture
def counting(ojs):
    pytest.importorskip("prometheus_client")
    from django_ojs.observe import metrics

    ojs(METRICS=True)
    metrics.enable()
    yield
    metrics.disable()


def test_every_surface_says_the_same_checkpoint_and_steps(api, admin_client, client, counting):
    _, scraper = ApiKey.objects.issue("scraper", ["read"])
    before = scrape(client, scraper)
    queue = "durable-agree"
    retry = {"max_attempts": 3, "initial_interval": "PT1S"}
    job_id = api.post("/ojs/v1/jobs", {"type": "order.fulfil", "args": [42],
                                       "options": {"queue": queue, "retry": retry}}).json()["job"]["id"]
    [first] = api.post("/ojs/v1/workers/fetch", {"queues": [queue], "worker_id": "w-a"}).json()["jobs"]
    assert first["id"] == job_id and "last_checkpoint" not in first and "steps" not in first
    lease = {"attempt": 1, "worker_id": "w-a"}
    assert api.put(f"/ojs/v1/jobs/{job_id}/progress", {"checkpoint": {"packed": 3}, **lease}).json()["accepted"]
    assert api.put(f"/ojs/v1/jobs/{job_id}/steps/charge", {"result": {"charge_id": "ch_1"}, **lease}).status_code == 200
    api.post("/ojs/v1/workers/nack", {"job_id": job_id, **lease, "error": {"type": "ConnectionError", "message": "x"}})
    Job.objects.filter(id=job_id).update(run_at=ago(seconds=1))
    assert Job.objects.promote_due(10) == 1
    [second] = api.post("/ojs/v1/workers/fetch", {"queues": [queue], "worker_id": "w-b"}).json()["jobs"]
    assert second["attempt"] == 2 and second["last_checkpoint"] == {"packed": 3}
    assert api.put(f"/ojs/v1/jobs/{job_id}/steps/label", {"attempt": 2, "worker_id": "w-b"}).status_code == 200

    record = api.get(f"/ojs/v1/jobs/{job_id}").json()["job"]
    steps = [(s["name"], s["attempt"], s["recorded_at"]) for s in record["steps"]]
    assert [(name, attempt) for name, attempt, _ in steps] == [("charge", 1), ("label", 2)]
    checkpoint = (record["last_checkpoint"], record["last_checkpoint_attempt"], record["last_checkpoint_at"])
    assert checkpoint[:2] == ({"packed": 3}, 1)
    # The retry's FETCH said the same as INFO did before the second step.
    assert [(s["name"], s["attempt"], s["recorded_at"]) for s in second["steps"]] == steps[:1]

    # The admin API's job.
    admin_record = api.get(f"/ojs/v1/admin/jobs/{job_id}").json()
    admin_record = admin_record.get("job", admin_record)
    assert [(s["name"], s["attempt"], s["recorded_at"]) for s in admin_record["steps"]] == steps
    assert admin_record["last_checkpoint_at"] == checkpoint[2]

    # The CLI, for scripts and for people.
    shown = json.loads(ojs_command("show", job_id, "--json"))
    assert [(s["name"], s["attempt"], s["recorded_at"]) for s in shown["steps"]] == steps
    assert (shown["last_checkpoint"], shown["last_checkpoint_attempt"], shown["last_checkpoint_at"]) == checkpoint
    text = ojs_command("show", job_id)
    assert "steps recorded: charge (attempt 1), label (attempt 2)" in text
    assert f"last checkpoint: attempt 1, {checkpoint[2]}" in text

    # The admin's job page: the same steps, attempts and checkpoint.
    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[Job.objects.get(id=job_id).pk]))
    html = page.content.decode()
    rows = re.findall(r'<td class="ojs-step-name">([^<]+)</td><td class="ojs-step-attempt">(\d+)</td>', html)
    assert [(name, int(attempt)) for name, attempt in rows] == [("charge", 1), ("label", 2)]
    assert "&quot;packed&quot;: 3" in html or '"packed": 3' in html

    # The events: one job.step_completed per recorded step, naming it.
    recorded = Event.objects.filter(type="job.step_completed", job_id=job_id).order_by("seq")
    assert [(e.data["step"], e.data["attempt"]) for e in recorded] == [("charge", 1), ("label", 2)]
    # The metrics: the recorded steps, and the one checkpoint by its size ({"packed":3} is 12 bytes).
    after = scrape(client, scraper)
    assert [now - then for now, then in zip(after, before, strict=True)] == [2.0, 1.0, 12.0]
