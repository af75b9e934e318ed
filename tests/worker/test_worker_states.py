"""A worker's state from facts, on every surface, with real processes and real signals.

SIGKILLed with a job held: once the reaper recovers the job, the admin, ``manage.py ojs
workers``, the admin API and the metrics all say ``dead`` and 0 jobs held (not the 1 its
last heartbeat said). SIGTERMed while running a long job: all say ``draining`` with that
job, calmly; then it finishes the job and leaves. SIGSTOPped past its heartbeat
timeout, declared dead, then SIGCONTed: all say ``running`` again, and all still say
when it was declared dead (the overview counts it among the last hour's deaths).
"""

from __future__ import annotations

import io
import json
import signal

import pytest
from django.core.management import call_command
from django.urls import reverse

import django_ojs
from django_ojs.admin.display import timestamp
from django_ojs.models import ApiKey, Job, Worker
from django_ojs.protocol.durations import format_timestamp

from .conftest import PATIENCE, heartbeats_pass, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FAST_DEATH = {"OJS_HEARTBEAT_TIMEOUT": "2"}


def every_surface(worker_id: str, api, admin_client, client) -> dict[str, tuple[str, int | None]]:
    """(state, jobs held) of one worker as each surface says it (the metrics count workers by
    state, and busy jobs per queue, not per worker: None)."""
    out = io.StringIO()
    call_command("ojs", "workers", "--all", "--json", stdout=out)
    [cli] = [row for row in json.loads(out.getvalue()) if row["id"] == worker_id]
    admin_api = api.get(f"/ojs/v1/admin/workers/{worker_id}").json()
    cells = admin_client.get(reverse("admin:django_ojs_worker_live")).json()["rows"][worker_id]
    _, key = ApiKey.objects.issue(f"scraper-{worker_id}-{ApiKey.objects.count()}", ["read"])
    metrics = client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}").content.decode()
    [metric_state] = [state for state in ("running", "quiet", "draining", "dead")
                      if f'ojs_workers{{state="{state}"}} 1.0' in metrics]
    admin_state = next(state for state in ("running", "quiet", "draining", "dead")
                       if f">{state}</span>" in cells["reported_state"])
    admin_held = int(cells["active_job_link"].split(">")[1].split(" ")[0])
    return {
        "manage.py ojs workers": (cli["state"], cli["active_jobs"]),
        "admin API": (admin_api["state"], admin_api["active_jobs"]),
        "admin": (admin_state, admin_held),
        "metrics": (metric_state, None),
    }


@pytest.fixture
def metrics_on(ojs):
    pytest.importorskip("prometheus_client")
    ojs(METRICS=True)


def test_a_worker_killed_with_a_job_held_is_dead_and_holds_nothing_on_every_surface(
    worker, reaper, api, admin_client, client, metrics_on
):
    doomed = worker(env=FAST_DEATH)
    job = django_ojs.enqueue("probe.record", [3600])
    wait_until(lambda: Worker.objects.filter(active_jobs=1).exists(), PATIENCE, "a heartbeat naming the job")
    [worker_id] = Worker.objects.values_list("id", flat=True)

    doomed.send(signal.SIGKILL)
    doomed.wait(timeout=PATIENCE)
    reaper(env=FAST_DEATH)
    wait_until(lambda: Job.objects.get(pk=job.pk).state == "available", PATIENCE, "the reaper to recover the job")

    said = every_surface(worker_id, api, admin_client, client)
    assert set(said.values()) == {("dead", 0), ("dead", None)}, said
    assert Worker.objects.get(pk=worker_id).active_jobs == 1  # what its last heartbeat said, shown nowhere


def test_a_worker_sigtermed_while_running_a_job_is_draining_with_it_then_leaves(
    worker, api, admin_client, client, metrics_on
):
    process = worker("--grace-period", "120")
    job = django_ojs.enqueue("probe.record", [8.0])
    wait_until(lambda: Execution.objects.exists(), PATIENCE, "the job to start")
    [worker_id] = Worker.objects.values_list("id", flat=True)

    process.send(signal.SIGTERM)
    wait_until(lambda: Worker.objects.filter(state="terminate").exists(), PATIENCE, "a heartbeat saying terminate")
    said = every_surface(worker_id, api, admin_client, client)
    assert set(said.values()) == {("draining", 1), ("draining", None)}, said
    cell = admin_client.get(reverse("admin:django_ojs_worker_live")).json()["rows"][worker_id]["reported_state"]
    assert "1 job still running" in cell and "ojs-worker-draining" in cell and "ojs-alarm" not in cell

    assert process.wait(timeout=300) == 0, process.output
    job.refresh_from_db()
    assert job.state == "completed"
    assert not Worker.objects.filter(pk=worker_id).exists()  # deregistered: gone from every surface


def test_a_sigtermed_worker_is_draining_at_once_not_quiet_until_its_next_heartbeat(
    worker, api, admin_client, client, metrics_on
):
    # Heartbeats 20 s apart: a surface that said "quiet" until the next one said it for 20 s.
    process = worker("--grace-period", "120", "--heartbeat-interval", "20")
    django_ojs.enqueue("probe.record", [60.0])
    wait_until(lambda: Execution.objects.exists(), PATIENCE, "the job to start")
    [worker_id] = Worker.objects.values_list("id", flat=True)

    process.send(signal.SIGTERM)
    process.wait_for_output(r"shutting down \(SIGTERM\)")
    # The quiet beat of ojs-graceful-shutdown §5.1 comes first; the one saying terminate follows it at once.
    wait_until(lambda: Worker.objects.filter(state="terminate").exists(), 10, "a heartbeat saying terminate")
    said = every_surface(worker_id, api, admin_client, client)
    assert set(said.values()) == {("draining", 1), ("draining", None)}, said
    process.send(signal.SIGTERM)  # the job runs for a minute: force the stop
    assert process.wait(timeout=PATIENCE) == 0, process.output


def test_a_worker_whose_handler_outlived_its_job_says_so_on_every_surface(worker, api, admin_client, client,
                                                                          metrics_on):
    """A handler past its timeout keeps its thread and slot; the worker's row said "running",
    0 jobs held, on every surface, while it could run one job less (or none)."""
    worker("--concurrency", "2", "--heartbeat-interval", "1")  # the fixture stops it
    stuck = django_ojs.enqueue("probe.record", [3600], timeout=1, retry={"max_attempts": 1})
    wait_until(lambda: Worker.objects.filter(overrun_handlers=1).exists(), PATIENCE,
               "a heartbeat counting the handler past its job")
    [worker_id] = Worker.objects.values_list("id", flat=True)
    assert Job.objects.get(id=stuck.id).state == "discarded"

    out = io.StringIO()
    call_command("ojs", "workers", "--json", stdout=out)
    [cli] = json.loads(out.getvalue())
    assert (cli["state"], cli["active_jobs"], cli["overrun_handlers"]) == ("running", 0, 1)
    admin_api = api.get(f"/ojs/v1/admin/workers/{worker_id}").json()
    assert (admin_api["active_jobs"], admin_api["overrun_handlers"]) == (0, 1)
    cells = admin_client.get(reverse("admin:django_ojs_worker_live")).json()["rows"][worker_id]
    assert "+ 1 held by handlers past their job" in cells["active_job_link"]
    overview = admin_client.get(reverse("admin:django_ojs_overview_changelist")).content.decode()
    assert f"Worker {worker_id}: 1 slot(s) held by handlers still running" in overview
    assert "runs at most 1 job(s) at once" in overview
    _, key = ApiKey.objects.issue("overrun scraper", ["read"])
    metrics = client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}").content.decode()
    assert "\nojs_handlers_overrun 1.0\n" in metrics


def test_a_worker_declared_dead_that_came_back_is_running_and_its_death_is_told_on_every_surface(
    worker, reaper, api, admin_client, client, metrics_on
):
    """Frozen (a stalled VM, a long GC pause), declared dead, its jobs given away, then back: the
    death happened. The overview forgot it the moment the worker beat again, and every other
    surface said only "running" with no date of it."""
    frozen = worker(env=FAST_DEATH)
    [worker_id] = Worker.objects.values_list("id", flat=True)
    frozen.send(signal.SIGSTOP)
    try:
        reaper(env=FAST_DEATH)
        wait_until(lambda: Worker.objects.filter(declared_dead_at__isnull=False).exists(), PATIENCE,
                   "the reaper to declare the frozen worker dead")
        assert {state for state, _ in every_surface(worker_id, api, admin_client, client).values()} == {"dead"}
    finally:
        frozen.send(signal.SIGCONT)
    wait_until(lambda: Worker.objects.filter(declared_dead_at__isnull=True).exists(), PATIENCE,
               "a heartbeat to revive the worker")

    said = every_surface(worker_id, api, admin_client, client)
    assert set(said.values()) == {("running", 0), ("running", None)}, said
    died = Worker.objects.get(pk=worker_id).last_declared_dead_at
    assert died is not None
    out = io.StringIO()
    call_command("ojs", "workers", "--json", stdout=out)
    [cli] = json.loads(out.getvalue())
    admin_api = api.get(f"/ojs/v1/admin/workers/{worker_id}").json()
    assert cli["last_declared_dead_at"] == admin_api["last_declared_dead_at"] == format_timestamp(died)
    assert cli["declared_dead_at"] is admin_api["declared_dead_at"] is None
    cell = admin_client.get(reverse("admin:django_ojs_worker_live")).json()["rows"][worker_id]["reported_state"]
    assert f"came back after being declared dead at {timestamp(died)}" in cell
    overview = admin_client.get(reverse("admin:django_ojs_overview_changelist")).content.decode()
    assert "1 worker(s) declared dead in the last hour" in overview
    assert "1 of them came back since" in overview
    _, key = ApiKey.objects.issue("revival scraper", ["read"])
    metrics = client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}").content.decode()
    assert "\nojs_workers_declared_dead_last_hour 1.0\n" in metrics


def test_a_handler_that_returns_once_its_job_is_cancelled_is_not_said_to_hold_its_slot(worker, api):
    """A cancelled job's handler that checks ``ctx.cancelled`` returns within its next check: the
    worker logged at once that it held its slot, "restart the worker to free them", while the
    heartbeat-fed surfaces (the Workers page, the overview, the CLI, the admin API, the metrics)
    said 0 a beat later. Counted, and said, only once it has outlived its job by a grace period."""
    process = worker("--concurrency", "1")
    job = django_ojs.enqueue("probe.cooperative", [3600])
    wait_until(lambda: Execution.objects.filter(job_id=job.id).exists(), PATIENCE, "the handler to start")
    assert api.delete(f"/ojs/v1/jobs/{job.id}").json()["job"]["state"] == "cancelled"
    process.wait_for_output(r"attempt 1: the job was cancelled; its result will be discarded")
    wait_until(lambda: Execution.objects.filter(job_id=job.id, finished_at__isnull=False).exists(), PATIENCE,
               "the handler to see the cancellation and return")
    heartbeats_pass(2)
    assert "slots are held by handlers" not in process.output, process.output
    assert Worker.objects.get().overrun_handlers == 0
