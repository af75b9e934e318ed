"""One meaning for "dead letter" on every surface (core/dead_letter.py, docs/explanation/decisions.md).

One job exhausted under the project's default policy (kept as a dead letter) and one whose own policy
says ``on_exhaustion: "discard"``: the worker's log line, the admin's Failed jobs page and job page, the
CLI's text and JSON, the HTTP job record, dead letter list and stats, the admin API and the metrics must
say the same thing about each -- what it is kept as, and until when.
"""

from __future__ import annotations

import io
import json
import logging
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from django_ojs.models import ApiKey, Job
from django_ojs.protocol.durations import format_timestamp

pytestmark = pytest.mark.django_db(transaction=True)


def ojs_command(*args: str) -> str:
    out = io.StringIO()
    call_command("ojs", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def exhaust(api, queue: str, retry: dict) -> Job:
    """Pushed, claimed and failed over HTTP until nothing is left to try."""
    pushed = api.post("/ojs/v1/jobs", {"type": "report.build", "args": [], "options": {"queue": queue, "retry": retry}})
    job_id = pushed.json()["job"]["id"]
    [claimed] = api.post("/ojs/v1/workers/fetch", {"queues": [queue], "worker_id": "w-agree"}).json()["jobs"]
    assert claimed["id"] == job_id
    failed = api.post("/ojs/v1/workers/nack", {"job_id": job_id, "worker_id": "w-agree", "attempt": claimed["attempt"],
                                               "error": {"type": "ValueError", "message": "bad input"}})
    assert failed.status_code == 200, failed.json()
    return Job.objects.get(id=job_id)


def test_every_surface_says_what_a_failed_job_is_kept_as_and_until_when(api, admin_client, client, ojs, caplog):
    ojs(METRICS=True)
    with caplog.at_level(logging.INFO, logger="django_ojs"):
        # No on_exhaustion: the project's default keeps it (OJS["DEFAULT_RETRY"]).
        dead = exhaust(api, "reports", {"max_attempts": 1})
        plain = exhaust(api, "thumbnails", {"max_attempts": 1, "on_exhaustion": "discard"})
    assert (dead.state, dead.dead_letter, plain.state, plain.dead_letter) == ("discarded", True, "discarded", False)
    until = {job: format_timestamp(job.kept_until) for job in (dead, plain)}
    # RETENTION: 180 days for the dead letter, 7 for a plain discard.
    assert (dead.kept_until - dead.finished_at).days == 180 and (plain.kept_until - plain.finished_at).days == 7
    kept = {dead: f"kept as dead letter until {until[dead]}", plain: f"discarded, kept until {until[plain]}"}
    flag = {dead: True, plain: False}

    # The log line of the failure that ended each.
    lines = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any(str(dead.id) in line and f"exhausted → dead letter, kept until {until[dead]}" in line for line in lines)
    assert any(str(plain.id) in line and f"exhausted → discarded, kept until {until[plain]}" in line for line in lines)

    # The admin: the Failed jobs page lists both, says which, and filters by it; each job's page says it.
    # It writes times its own way, the API's form in each <time>'s datetime (docs/explanation/decisions.md).
    def at(job: Job) -> str:
        return f'<time class="ojs-moment" datetime="{until[job]}"'

    failed_page = admin_client.get(reverse("admin:django_ojs_deadletterjob_changelist")).content.decode()
    assert "Failed jobs" in failed_page
    assert f"kept as dead letter until {at(dead)}" in failed_page  # the list: the date, the time on hover
    assert f"discarded, kept until {at(plain)}" in failed_page
    only_dead = admin_client.get(reverse("admin:django_ojs_deadletterjob_changelist") + "?kept=dead_letter")
    assert str(dead.id) in only_dead.content.decode() and str(plain.id) not in only_dead.content.decode()
    for job, said in ((dead, f"yes — kept until {at(dead)}"), (plain, f"no — discarded, kept until {at(plain)}")):
        page = admin_client.get(reverse("admin:django_ojs_job_change", args=[job.pk])).content.decode()
        assert said in page

    # The CLI, for people and for scripts.
    for job in (dead, plain):
        assert ojs_command("show", str(job.id)).rstrip().endswith(kept[job])
        shown = json.loads(ojs_command("show", str(job.id), "--json"))
        assert (shown["dead_letter"], shown["kept_until"]) == (flag[job], until[job])
    listed = {row["id"]: row["kept"] for row in json.loads(ojs_command("jobs", "--state", "discarded", "--json"))}
    assert listed == {str(job.id): kept[job] for job in (dead, plain)}
    assert [row["id"] for row in json.loads(ojs_command("jobs", "--kept-as", "dead_letter", "--json"))] == [str(dead.id)]

    # HTTP: the job's own record, the dead letter and its figures.
    for job in (dead, plain):
        record = api.get(f"/ojs/v1/jobs/{job.id}").json()["job"]
        assert (record["dead_letter"], record["kept_until"]) == (flag[job], until[job])
    assert [job["id"] for job in api.get("/ojs/v1/dead-letter").json()["jobs"]] == [str(dead.id)]
    stats = api.get("/ojs/v1/dead-letter/stats").json()
    assert (stats["total"], stats["by_queue"]) == (1, {"reports": 1})
    assert api.get(f"/ojs/v1/dead-letter/{plain.id}").status_code == 404

    # The admin API: every discarded job says what it is kept as; its dead letter is the same one job.
    items = api.get("/ojs/v1/admin/jobs?state=discarded").json()["items"]
    assert {item["id"]: (item["dead_letter"], item["kept_until"]) for item in items} == {
        str(job.id): (flag[job], until[job]) for job in (dead, plain)}
    assert [item["id"] for item in api.get("/ojs/v1/admin/dead-letter").json()["items"]] == [str(dead.id)]
    assert api.get("/ojs/v1/admin/dead-letter/stats").json() == stats

    # The metrics: the dead letter gauge counts what the stats count.
    pytest.importorskip("prometheus_client")
    _, key = ApiKey.objects.issue("scraper", ["read"])
    scraped = client.get("/ojs/v1/metrics", HTTP_AUTHORIZATION=f"Bearer {key}").content.decode()
    gauge = dict(re.findall(r'^ojs_dead_letter_jobs\{queue="([^"]+)"\} (\S+)$', scraped, re.MULTILINE))
    assert {queue: float(n) for queue, n in gauge.items()} == {queue: float(n) for queue, n in stats["by_queue"].items()}
