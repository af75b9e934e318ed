"""One meaning per word: a worker's state, the jobs it holds, the jobs no worker can run, a
queue's oldest wait and time to drain, and the jobs a type filter selects say the same on every
surface -- the admin, manage.py ojs, the admin API and the metrics."""

from __future__ import annotations

import datetime as dt
import io
import json
import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from django_ojs.admin.display import human_duration
from django_ojs.core import queue_config, queues
from django_ojs.core.types import HeldJob, WorkerInfo
from django_ojs.models import ApiKey, Job, Queue, Worker
from tests.admin.test_pages import listed
from tests.helpers import ago
from tests.job_rows import insert_jobs

pytestmark = pytest.mark.django_db

ADMIN = "/ojs/v1/admin"


def ojs_json(*args: str):
    out = io.StringIO()
    call_command("ojs", *args, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def scraped(client, ojs) -> str:
    """The metrics as a scrape reads them, with the metrics on (skipped without prometheus_client)."""
    pytest.importorskip("prometheus_client")
    ojs(METRICS=True)
    _, key = ApiKey.objects.issue("scraper", ["read"])
    return client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}").content.decode()


@pytest.fixture
def fleet(claim, push):
    """A running worker holding a job, a dead one whose job was recovered, a draining one
    still running a job, and two waiting jobs of a type only the dead one handled."""
    info = {"queues": ["default"], "concurrency": 4}
    Worker.objects.register("w-live", WorkerInfo(handles=["email.send"], **info))
    Worker.objects.register("w-dead", WorkerInfo(handles=["report.new"], **info))
    Worker.objects.register("w-going", WorkerInfo(handles=["report.new"], **info))
    live, dead, going = claim("w-live"), claim("w-dead"), claim("w-going")
    Worker.objects.beat("w-live", held=[HeldJob(str(live.id), 1)])
    Worker.objects.beat("w-dead", held=[HeldJob(str(dead.id), 1)])  # its last word: 1 job
    Worker.objects.beat("w-going", state="terminate", held=[HeldJob(str(going.id), 1)])
    Worker.objects.filter(pk="w-dead").update(last_heartbeat_at=ago(minutes=5))
    assert Worker.objects.reap_dead(100) == 1  # the reaper: declared dead, its job put back
    push(type="report.new")
    push(type="report.new")


def test_every_surface_says_the_same_state_and_held_jobs_of_each_worker(fleet, api, admin_client, client, ojs):
    said = {"w-live": ("running", 1), "w-dead": ("dead", 0), "w-going": ("draining", 1)}

    cli = {w["id"]: (w["state"], w["active_jobs"]) for w in ojs_json("workers", "--all")}
    assert cli == said
    api_rows = {w["id"]: (w["state"], w["active_jobs"]) for w in api.get(f"{ADMIN}/workers").json()["items"]}
    assert api_rows == said
    assert api.get(f"{ADMIN}/workers/w-dead").json()["active_jobs"] == 0

    cells = admin_client.get(reverse("admin:django_ojs_worker_live")).json()["rows"]
    for worker_id, (state, held) in said.items():
        assert f">{state}</span>" in cells[worker_id]["reported_state"], cells[worker_id]
        assert f">{held} / 4</a>" in cells[worker_id]["active_job_link"], cells[worker_id]
    assert "1 job still running" in cells["w-going"]["reported_state"]
    assert "ojs-worker-draining" in cells["w-going"]["reported_state"]  # calm, not the alarm's red

    text = scraped(client, ojs)
    for state in ("running", "dead", "draining"):
        assert f'ojs_workers{{state="{state}"}} 1.0' in text
    assert 'ojs_workers_active 2.0' in text


def test_every_surface_names_the_jobs_no_running_worker_can_run(fleet, admin_client, client, ojs):
    [default] = [queue for queue in ojs_json("queues") if queue["name"] == "default"]
    assert [(item["type"], item["count"]) for item in default["unrunnable"]] == [("report.new", 2)]
    out = io.StringIO()
    call_command("ojs", "queues", stdout=out)
    assert "report.new=2" in out.getvalue()

    page = admin_client.get(reverse("admin:django_ojs_overview_changelist")).content.decode()
    assert "2 job(s) of type report.new on queue default that no running worker can handle" in page

    text = scraped(client, ojs)
    assert 'ojs_jobs_unrunnable{queue="default",type="report.new"} 2.0' in text


def test_every_surface_says_a_queue_no_live_worker_reads(fleet, push, admin_client):
    push(type="email.send", options={"queue": "orphans"})
    rows = {queue["name"]: queue for queue in ojs_json("queues")}
    assert (rows["orphans"]["no_live_worker"], rows["default"]["no_live_worker"]) == (True, False)
    out = io.StringIO()
    call_command("ojs", "queues", stdout=out)
    [line] = [line for line in out.getvalue().splitlines() if line.startswith("orphans ")]
    assert "no live worker reads it" in line
    page = admin_client.get(reverse("admin:django_ojs_overview_changelist")).content.decode()
    assert "waiting on queue orphans, and no live worker reads it" in page


def test_every_surface_counts_a_queues_jobs_alike(push, api, client, ojs):
    """Every state, the finished ones too, from the same counts (core/stats.py)."""
    for state in ("available", "available", "completed", "cancelled", "discarded", "scheduled"):
        job = push(options={"queue": "mail"})
        if state != "available":
            Job.objects.filter(id=job.id).update(state=state, finished_at=ago(seconds=5))
    [api_row] = [queue for queue in api.get(f"{ADMIN}/queues").json()["items"] if queue["name"] == "mail"]
    [cli_row] = [queue for queue in ojs_json("queues") if queue["name"] == "mail"]
    assert cli_row["counts"] == api_row["counts"] and cli_row["counts_estimated"] == api_row["counts_estimated"] == []
    assert (cli_row["counts"]["available"], cli_row["counts"]["completed"], cli_row["counts"]["cancelled"]) == (2, 1, 1)
    text = scraped(client, ojs)
    for state, n in cli_row["counts"].items():
        assert f'ojs_queue_depth{{queue="mail",state="{state}"}} {float(n)}' in text
    out = io.StringIO()
    call_command("ojs", "queues", stdout=out)
    assert "scheduled=1 available=2 completed=1 cancelled=1 discarded=1" in out.getvalue()


def test_a_count_past_its_bound_is_named_an_estimate_on_every_surface(push, api):
    push(options={"queue": "mail"})  # the queue's row, as its first use gives it
    insert_jobs(1100, state="discarded", queue="mail", analyze=True)
    [api_row] = [queue for queue in api.get(f"{ADMIN}/queues").json()["items"] if queue["name"] == "mail"]
    stats = api.get("/ojs/v1/queues/mail/stats").json()["stats"]
    [cli_row] = [queue for queue in ojs_json("queues") if queue["name"] == "mail"]
    # SQLite has no planner estimate to give: it counts them all.
    estimated = ["discarded"] if connection.vendor == "postgresql" else []
    assert api_row["counts_estimated"] == stats["counts_estimated"] == cli_row["counts_estimated"] == estimated
    assert api_row["counts"]["discarded"] == stats["discarded"] == cli_row["counts"]["discarded"] > 1000
    if connection.vendor != "postgresql":  # a count said to be exact is the count, not its bound
        assert stats["discarded"] == 1100


def test_every_surface_says_the_same_oldest_wait_and_time_to_drain(push, api, admin_client, client, ojs):
    for _ in range(6):
        push(options={"queue": "mail"})
    Job.objects.filter(queue="mail").update(enqueued_at=ago(minutes=2))
    for _ in range(3):  # finished in the last 5 minutes, the first of them 4 minutes ago: 0.6 a minute
        push(options={"queue": "mail"}, args=["done"])
    Job.objects.filter(queue="mail", args=["done"]).update(state="completed", finished_at=ago(minutes=1))
    Job.objects.filter(queue="mail", args=["done"]).filter(
        seq=Job.objects.filter(queue="mail", args=["done"]).order_by("seq").values("seq")[:1]
    ).update(finished_at=ago(minutes=4))
    push(options={"queue": "sms"})  # waiting, nothing finished: no rate

    rows = {queue["name"]: queue for queue in api.get(f"{ADMIN}/queues").json()["items"]}
    assert rows["mail"]["estimated_drain_seconds"] == 600  # 6 jobs at 0.6 a minute
    assert rows["sms"]["estimated_drain_seconds"] is None
    age = rows["mail"]["oldest_available_age_seconds"]
    assert 115 <= age <= 300

    cli = {queue["name"]: queue for queue in ojs_json("queues")}
    assert (cli["mail"]["estimated_drain_seconds"], cli["sms"]["estimated_drain_seconds"]) == (600, None)
    assert abs(cli["mail"]["oldest_available_age_seconds"] - age) < 60

    page = admin_client.get(reverse("admin:django_ojs_queue_changelist")).content.decode()
    # The page lists queues by name: mail, then sms.
    cells = dict(zip(["mail", "sms"], re.findall(r'<span class="ojs-drain">(.*?)</span></td>', page), strict=True))
    assert cells["mail"] == "drains in " + human_duration(dt.timedelta(seconds=600))
    assert "no rate" in cells["sms"]

    text = scraped(client, ojs)
    assert 'ojs_queue_drain_seconds{queue="mail"} 600.0' in text
    assert 'ojs_queue_drain_seconds{queue="sms"}' not in text
    scraped_age = float(re.search(r'ojs_queue_oldest_available_age_seconds\{queue="mail"\} ([0-9.]+)', text).group(1))
    assert abs(scraped_age - age) < 60

    stats = api.get("/ojs/v1/queues/mail/stats").json()["stats"]
    assert abs(stats["oldest_available_age_ms"] / 1000 - age) < 60 and stats["oldest_available_exact"]
    # None waits in an unused queue: 0, on the queue's statistics as in the admin API.
    assert api.get("/ojs/v1/queues/idle/stats").json()["stats"]["oldest_available_age_ms"] == 0


def test_every_surface_says_the_same_limits_bound_and_fairness_of_a_queue(push, api, admin_client):
    queue_config.update("mail", queue_config.parse_config(
        {"concurrency": 5, "rate_limit": {"limit": 60, "period": "PT1M"}, "max_size": 1000,
         "fairness_key": "meta.tenant", "fairness_weights": {"acme": 3}, "fairness_default_weight": 2}, "mail"))
    push(options={"queue": "mail"}, meta={"tenant": "acme"})
    Job.objects.fetch(["mail"], worker_id="w1")  # one active of five
    said = "1 / 5 active; rate 60 per PT1M; max size 1,000 (reject); fair by meta.tenant (weights acme 3; others 2)"

    page = admin_client.get(reverse("admin:django_ojs_queue_changelist")).content.decode()
    assert f'title="configure">{said}</a>' in page
    [row] = [queue for queue in ojs_json("queues") if queue["name"] == "mail"]
    assert row["limits"] == said
    assert row["config"] == api.get("/ojs/v1/queues/mail/config").json()["config"]
    out = io.StringIO()
    call_command("ojs", "queues", stdout=out)
    assert said in out.getvalue()


def test_a_queue_that_started_working_a_moment_ago_is_judged_by_that_moment(push, api):
    """Its rate is taken since its first finish in the window (plus the mean gap between finishes),
    not over 5 minutes it did no work in: 10 jobs finished in the last 20 s are a rate of about 27
    a minute, and 20 waiting drain in about 44 s, where the 5 minutes said 2 a minute and 600 s."""
    for _ in range(20):
        push(options={"queue": "mail"})
    for index in range(10):
        push(options={"queue": "mail"}, args=[index])
        Job.objects.filter(queue="mail", args=[index]).update(
            state="completed", finished_at=ago(seconds=20 - 2 * index))
    [row] = [queue for queue in api.get(f"{ADMIN}/queues").json()["items"] if queue["name"] == "mail"]
    # 10 finishes, the first 20 s ago: taken over 22 s (20 s and the mean gap of 2 s).
    assert 40 <= row["estimated_drain_seconds"] <= 50, row
    assert 25 <= row["throughput"]["processed_per_minute"] <= 29, row
    [cli] = [queue for queue in ojs_json("queues") if queue["name"] == "mail"]
    assert abs(cli["estimated_drain_seconds"] - row["estimated_drain_seconds"]) <= 1
    assert cli["throughput"] == pytest.approx(row["throughput"], abs=0.1)  # read a moment later
    # The whole is the sum of its parts: mail is the only queue that finished any.
    whole = api.get(f"{ADMIN}/stats").json()["throughput"]
    assert whole["processed_per_minute"] == pytest.approx(row["throughput"]["processed_per_minute"], abs=0.5)


def test_a_paused_queue_does_not_drain_on_any_surface(push, api, admin_client, client, ojs):
    for _ in range(4):
        push(options={"queue": "mail"})
    Job.objects.filter(queue="mail").update(enqueued_at=ago(minutes=1))
    push(options={"queue": "mail"}, args=["done"])
    Job.objects.filter(queue="mail", args=["done"]).update(state="completed", finished_at=ago(minutes=4))
    [row] = [queue for queue in api.get(f"{ADMIN}/queues").json()["items"] if queue["name"] == "mail"]
    assert row["estimated_drain_seconds"] == 4 * 5 * 60  # a rate of 1 in 5 minutes
    queues.pause("mail")
    [row] = [queue for queue in api.get(f"{ADMIN}/queues").json()["items"] if queue["name"] == "mail"]
    assert row["paused"] is True and row["estimated_drain_seconds"] is None
    assert row["oldest_available_age_seconds"] > 0  # the jobs still wait, and for how long is a fact
    [cli] = [queue for queue in ojs_json("queues") if queue["name"] == "mail"]
    assert cli["estimated_drain_seconds"] is None
    page = admin_client.get(reverse("admin:django_ojs_queue_changelist")).content.decode()
    assert "does not drain: paused" in page and "drains in" not in page

    text = scraped(client, ojs)
    assert 'ojs_queue_paused{queue="mail"} 1.0' in text
    assert 'ojs_queue_drain_seconds{queue="mail"}' not in text


def test_past_the_metrics_queue_bound_the_queues_with_waiting_jobs_keep_their_gauges(push, client, ojs, monkeypatch):
    from django_ojs.observe import metrics

    pytest.importorskip("prometheus_client")
    monkeypatch.setattr(metrics, "MAX_QUEUES", 3)
    for name in ("aa", "ab", "ac", "ad"):
        Queue.objects.create(name=name)
    push(options={"queue": "zz"})  # named last, and the only one with work
    ojs(METRICS=True)
    _, key = ApiKey.objects.issue("scraper", ["read"])
    text = client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}").content.decode()
    assert 'ojs_queue_oldest_available_age_seconds{queue="zz"}' in text
    assert [name for name in ("aa", "ab", "ac", "ad") if f'ojs_queue_paused{{queue="{name}"}}' in text] == ["aa", "ab"]
    assert "ojs_queues_unreported 2.0" in text


def test_every_surface_takes_a_type_ending_in_a_star_as_a_prefix(push, api, admin_client):
    hunts = {str(push(type=kind).id) for kind in ("hunt.fox", "hunt.deer.red")}
    push(type="hunting.licence")  # "hunt.*" is the family "hunt.", not every type starting "hunt"
    push(type="fish.trout")

    assert {row["id"] for row in api.get(f"{ADMIN}/jobs?type=hunt.*").json()["items"]} == hunts
    assert {row["id"] for row in ojs_json("jobs", "--type", "hunt.*")} == hunts
    page = admin_client.get(reverse("admin:django_ojs_job_changelist"), {"type": "hunt.*"})
    assert set(listed(page)) == hunts
    # An exact type is still exact.
    assert listed(admin_client.get(reverse("admin:django_ojs_job_changelist"), {"type": "hunt"})) == []


def test_a_silent_reaper_shows_in_the_metrics_as_on_the_overview(admin_client, client, ojs):
    from django_ojs.core import maintenance
    from django_ojs.models import ReaperTick

    assert re.search(r"^ojs_reapers_ticking 0\.0$", scraped(client, ojs), re.M)  # none ever ticked
    maintenance.record_reaper_tick("reaper-1", "host", 42)
    assert re.search(r"^ojs_reapers_ticking 1\.0$", scraped(client, ojs), re.M)
    ReaperTick.objects.update(last_tick_at=ago(seconds=60))  # killed a minute ago

    page = admin_client.get(reverse("admin:django_ojs_overview_changelist")).content.decode()
    assert re.search(r"No reaper for 6\d s", page)
    assert re.search(r"^ojs_reapers_ticking 0\.0$", scraped(client, ojs), re.M)


def test_every_surface_says_the_attempts_charged_past_a_release(push, api, admin_client):
    """Released at a shutdown, a job's second run read "attempt": 2 of "max_attempts": 2 over
    HTTP and in the CLI -- exhausted to a client -- where the admin and the log said 1 of 2 charged."""
    from django_ojs.core.types import Lease
    from django_ojs.protocol.failure import Failure

    pushed = push(type="report.new", options={"queue": "charged", "retry": {"max_attempts": 2}})
    [job] = Job.objects.fetch(["charged"], worker_id="w1")
    Job.objects.fail(job.id, Failure(type="ShutdownError", message="released"), lease=Lease("w1"), requeue=True)
    [job] = Job.objects.fetch(["charged"], worker_id="w2")
    assert (job.attempt, job.releases) == (2, 1)

    served = api.get(f"/ojs/v1/jobs/{pushed.id}").json()["job"]
    assert (served["attempt"], served["attempts_charged"], served["max_attempts"]) == (2, 1, 2)
    assert ojs_json("show", str(pushed.id))["attempts_charged"] == 1
    [listed_job] = ojs_json("jobs", "--queue", "charged")
    assert (listed_job["attempt"], listed_job["attempts_charged"]) == (2, 1)
    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[job.seq])).content.decode()
    assert "2 (1 / 2 charged)" in page
    # A job never released says nothing more than its attempt.
    plain = push(type="report.new", options={"queue": "plain"})
    assert "attempts_charged" not in api.get(f"/ojs/v1/jobs/{plain.id}").json()["job"]
