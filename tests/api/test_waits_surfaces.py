"""One meaning per word for snooze and signals: the snooze count, what a job waits for since and until
when, and the signals it got say the same in INFO, manage.py ojs, the admin, the events and the metrics;
the CLI's and the admin's signal deliver what the HTTP API does."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from django_ojs.core.types import Lease
from django_ojs.models import Event, Job
from django_ojs.observe import metrics
from tests.helpers import ago, reload, update

pytestmark = pytest.mark.django_db(transaction=True)


def ojs(*args: str) -> str:
    out = io.StringIO()
    call_command("ojs", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def parked(claim):
    """A job that snoozed once, then ran again and now waits for "approved"; and a signal for another name."""
    job = claim("w1", type="order.ship")
    Job.objects.snooze(job.id, dt.timedelta(seconds=5), lease=Lease("w1", 1))
    update(job, run_at=ago(seconds=1))
    Job.objects.promote_due(10)
    [job] = Job.objects.fetch([job.queue], worker_id="w1")
    Job.objects.wait(job.id, "approved", dt.timedelta(hours=1), lease=Lease("w1", 2))
    Job.objects.signal(job.id, "shipped-label", {"n": 1})
    return reload(job)


def test_every_surface_says_the_same_snoozes_wait_and_signals(parked, api, admin_client):
    info = api.get(f"/ojs/v1/jobs/{parked.id}").json()["job"]
    assert info["snoozes"] == 1
    assert info["waiting"]["signal"] == "approved"
    assert set(info["signals"]) == {"shipped-label"}

    shown = json.loads(ojs("show", str(parked.id), "--json"))
    assert {key: shown[key] for key in ("snoozes", "waiting", "signals")} == {
        key: info[key] for key in ("snoozes", "waiting", "signals")
    }
    [listed_row] = [row for row in json.loads(ojs("jobs", "--json")) if row["id"] == str(parked.id)]
    assert listed_row["snoozes"] == info["snoozes"]
    text = ojs("show", str(parked.id))
    assert f"waiting for signal approved since {info['waiting']['since']}, until {info['waiting']['until']}" in text

    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[parked.pk])).content.decode()
    assert '<code class="ojs-waiting-for">approved</code>' in page
    assert 'data-signal="shipped-label"' in page
    assert "Send a signal" in page
    listed = admin_client.get(reverse("admin:django_ojs_job_changelist") + "?waiting=signal").content.decode()
    assert str(parked.id)[:8] in listed and "waits for approved" in listed
    # Its attempts, those charged (the snooze and the wait spent none), and the snooze.
    assert f"2 ({info['attempts_charged']} / 3 charged) · 1 snoozed" in listed
    assert listed_row["attempts_charged"] == shown["attempts_charged"] == info["attempts_charged"]
    assert str(parked.id)[:8] in admin_client.get(
        reverse("admin:django_ojs_job_changelist") + "?waiting=snoozed").content.decode()

    kinds = list(Event.objects.filter(job_id=parked.id).values_list("type", "extra"))
    snoozed = [data for kind, data in kinds if kind == "job.snoozed"]
    waiting = [data for kind, data in kinds if kind == "job.waiting"]
    assert [data["snoozes"] for data in snoozed] == [info["snoozes"]]
    assert [(data["signal"], data["since"], data["until"]) for data in waiting] == [
        ("approved", info["waiting"]["since"], info["waiting"]["until"])
    ]


def test_the_cli_and_the_admin_deliver_a_signal_as_the_http_api_does(parked, admin_client, api):
    assert ojs("signal", str(parked.id), "approved", "--payload", '{"by": "ann"}').startswith(
        f"signal approved delivered to job {parked.id}, which is available")
    signals = api.get(f"/ojs/v1/jobs/{parked.id}").json()["job"]["signals"]
    assert signals["approved"]["payload"] == {"by": "ann"}
    # Once is enough: the second is refused, with the same words as the wire's 409.
    with pytest.raises(CommandError, match="already has signal 'approved'"):
        ojs("signal", str(parked.id), "approved")
    with pytest.raises(CommandError, match="--payload must be JSON"):
        ojs("signal", str(parked.id), "other", "--payload", "{nope")

    url = reverse("admin:django_ojs_job_signal", args=[parked.pk])
    assert admin_client.get(url).status_code == 200
    refused = admin_client.post(url, {"name": "approved", "payload": "null"}, follow=True).content.decode()
    assert "already has signal" in refused
    admin_client.post(url, {"name": "late", "payload": "[1, 2]"})
    assert reload(parked).signals["late"]["payload"] == [1, 2]
    bad = admin_client.post(url, {"name": "bad name", "payload": "1"}).content.decode()
    assert "letters, digits" in bad and "bad name" not in (reload(parked).signals or {})


def test_the_metrics_count_snoozes_waits_and_signals_from_the_events(claim):
    pytest.importorskip("prometheus_client")
    from prometheus_client import REGISTRY

    def value(name: str) -> float:
        return REGISTRY.get_sample_value(name, {"queue": job.queue, "type": "order.ship"}) or 0.0

    job = claim("w1", type="order.ship")
    before = [value(f"ojs_job_{kind}_total") for kind in ("snoozed", "waiting", "signalled")]
    metrics.enable()
    try:
        Job.objects.snooze(job.id, dt.timedelta(seconds=5), lease=Lease("w1", 1))
        update(job, run_at=ago(seconds=1))
        Job.objects.promote_due(10)
        [job] = Job.objects.fetch([job.queue], worker_id="w1")
        Job.objects.wait(job.id, "approved", dt.timedelta(hours=1), lease=Lease("w1", 2))
        Job.objects.signal(job.id, "approved", 1)
    finally:
        metrics.disable()
    counted = [value(f"ojs_job_{kind}_total") - was
               for kind, was in zip(("snoozed", "waiting", "signalled"), before, strict=True)]
    assert counted == [1.0, 1.0, 1.0]
    assert [Event.objects.filter(job_id=job.id, type=f"job.{kind}").count()
            for kind in ("snoozed", "waiting", "signalled")] == [1, 1, 1]
