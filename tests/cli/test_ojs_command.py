"""manage.py ojs: listings, bulk moves by filter with dry runs and confirmation, queues, workers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import django_ojs
from django_ojs.core.types import Lease, WorkerInfo
from django_ojs.models import Job, Queue, Worker
from tests.core.contract.test_unique import unique_push
from tests.helpers import ago, update
from tests.job_rows import insert_jobs

pytestmark = pytest.mark.django_db


def ojs(*args: str) -> str:
    out = io.StringIO()
    call_command("ojs", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def ojs_json(*args: str):
    return json.loads(ojs(*args, "--json"))


def exit_code(*args: str) -> int:
    with pytest.raises(CommandError) as failed:
        ojs(*args)
    return failed.value.returncode


def test_jobs_lists_by_filter_newest_first(push):
    first = push(type="a.one", options={"queue": "q1"})
    second = push(type="a.two", options={"queue": "q1"})
    push(type="a.one", options={"queue": "q2"})
    rows = ojs_json("jobs", "--queue", "q1")
    assert [row["id"] for row in rows] == [str(second.id), str(first.id)]
    assert [row["id"] for row in ojs_json("jobs", "--queue", "q1", "--type", "a.one")] == [str(first.id)]
    assert len(ojs_json("jobs", "--limit", "1")) == 1
    table = ojs("jobs", "--queue", "q1")
    assert table.splitlines()[0].split()[:4] == ["ID", "TYPE", "QUEUE", "STATE"] and str(first.id) in table


def test_jobs_searches_inside_args(push):
    wanted = push(type="mail", args=[{"to": "ada@example.com", "user": {"id": 7}}])
    push(type="mail", args=[{"to": "bob@example.com", "user": {"id": 8}}])
    assert [r["id"] for r in ojs_json("jobs", "--search", "args.to=ada@example.com")] == [str(wanted.id)]
    assert [r["id"] for r in ojs_json("jobs", "--search", "args.user.id=7")] == [str(wanted.id)]
    assert [r["id"] for r in ojs_json("jobs", "--search", 'args:{"user": {"id": 7}}')] == [str(wanted.id)]


def test_show_prints_the_job_with_its_history_and_a_missing_one_exits_1(push):
    job = push(type="a.b", args=[1])
    shown = ojs_json("show", str(job.id))
    assert (shown["id"], shown["type"], shown["args"]) == (str(job.id), "a.b", [1])
    assert exit_code("show", "00000000-0000-0000-0000-000000000000") == 1
    assert exit_code("show", "not-a-uuid") == 1


def test_show_says_what_the_http_api_and_the_admin_say_of_the_jobs_progress(claim, api, admin_client):
    job = claim("w1")
    assert ojs_json("show", str(job.id))["progress"] == {"progress": None, "data": None, "message": None,
                                                         "updated_at": None}
    api.put(f"/ojs/v1/jobs/{job.id}/progress", {"progress": 0.5, "data": {"rows": 5}, "message": "half way"})
    wire = api.get(f"/ojs/v1/jobs/{job.id}/progress").json()
    shown = ojs_json("show", str(job.id))["progress"]
    assert shown == {key: wire[key] for key in ("progress", "data", "message", "updated_at")}
    page = admin_client.get(f"/admin/django_ojs/job/{job.pk}/change/").content.decode()
    assert '<strong class="ojs-progress-figure">50%</strong>' in page
    assert '<span class="ojs-progress-message">half way</span>' in page


def test_bad_input_exits_1_and_changes_nothing():
    insert_jobs(3, queue="dl")
    assert exit_code("retry", "--state", "bogus", "--yes") == 1
    assert exit_code("jobs", "--search", "args:{broken") == 1
    assert exit_code("retry", "--yes") == 1  # no filter and no --all
    assert Job.objects.filter(state="discarded").count() == 3


def test_a_malformed_queue_filter_exits_1_with_the_admin_apis_message_and_changes_nothing(api):
    # Not a filter that matches nothing (exit 0): bad input, as GET /ojs/v1/admin/jobs answers 400.
    insert_jobs(3, queue="dl")
    refused = api.get("/ojs/v1/admin/jobs?queue=Bad_Name")
    assert refused.status_code == 400
    for args in (("jobs",), ("jobs", "--json"), ("retry", "--dry-run"),
                 *((move, "--yes") for move in ("retry", "purge", "delete", "cancel", "discard", "activate"))):
        with pytest.raises(CommandError) as failed:
            ojs(*args, "--queue", "dl", "--queue", "Bad_Name")
        assert failed.value.returncode == 1, args
        assert str(failed.value) == refused.json()["error"]["message"], args
    assert Job.objects.filter(queue="dl", state="discarded").count() == 3


def test_retry_by_last_error_type_after_a_fix(push, claim):
    from django_ojs.protocol.failure import Failure

    def dead_with(error_type: str) -> Job:
        job = claim("w1", options={"max_attempts": 1})
        Job.objects.fail(job.id, Failure(type=error_type, message="", retryable=False))
        return job

    fixed, other = dead_with("DatabaseConnectionError"), dead_with("ValueError")
    report = ojs_json("retry", "--error-type", "DatabaseConnectionError", "--yes")
    assert report["moved"] == 1
    assert Job.objects.get(pk=fixed.pk).state == "available" and Job.objects.get(pk=other.pk).state == "discarded"


def test_a_dry_run_counts_and_moves_nothing():
    insert_jobs(5, queue="dl")
    insert_jobs(2, queue="dl", state="completed")
    report = ojs_json("retry", "--queue", "dl", "--dry-run")
    assert report == {"move": "retry", "matched": 5, "dry_run": True}
    assert Job.objects.filter(state="discarded").count() == 5


def test_a_bulk_move_nobody_confirmed_exits_3_and_moves_nothing():
    # Under pytest stdin is not a terminal: nobody can answer the question.
    insert_jobs(4, queue="dl")
    assert exit_code("purge", "--queue", "dl") == 3
    assert Job.objects.count() == 4


def test_retry_with_yes_moves_every_match_in_batches_and_reports():
    insert_jobs(25, queue="dl")
    insert_jobs(3, queue="other")
    report = ojs_json("retry", "--queue", "dl", "--yes", "--batch-size", "10")
    assert (report["moved"], report["skipped"], report["batches"], report["matched"]) == (25, 0, 3, 25)
    assert Job.objects.filter(queue="dl", state="available").count() == 25
    assert Job.objects.filter(queue="other", state="discarded").count() == 3
    text = ojs("purge", "--all", "--yes")
    assert text.strip() == "purge: 3 moved in 1 batches" and not Job.objects.filter(queue="other").exists()


def test_cancel_by_search_takes_only_the_matching_jobs(push):
    wanted = push(type="mail", args=[{"tenant": "t1"}], options={"queue": "c"})
    other = push(type="mail", args=[{"tenant": "t2"}], options={"queue": "c"})
    report = ojs_json("cancel", "--search", "args.tenant=t1", "--yes")
    assert report["moved"] == 1
    assert Job.objects.get(pk=wanted.pk).state == "cancelled" and Job.objects.get(pk=other.pk).state == "available"


def test_a_partial_move_exits_4_and_says_why(push):
    first = unique_push(push, queue="dl")
    update(first, state="discarded", finished_at=ago(seconds=1))
    unique_push(push, queue="elsewhere-holder")  # another queue holds the key now
    insert_jobs(2, queue="dl")
    out = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("ojs", "retry", "--queue", "dl", "--yes", stdout=out, stderr=io.StringIO())
    assert failed.value.returncode == 4
    assert out.getvalue().strip() == "retry: 2 moved in 1 batches, 1 skipped: unique key held by a live job (1)"
    assert Job.objects.filter(queue="dl", state="available").count() == 2


def test_pause_resume_and_queues(push):
    push(options={"queue": "mail"})
    assert ojs_json("pause", "mail", "billing") == [{"name": "mail", "paused": True}, {"name": "billing", "paused": True}]
    assert Queue.objects.get(name="mail").paused
    queues = {q["name"]: q for q in ojs_json("queues")}
    assert queues["mail"]["paused"] and queues["mail"]["counts"]["available"] == 1
    ojs("resume", "mail")
    assert not Queue.objects.get(name="mail").paused
    assert exit_code("pause", "bad queue name!") == 1


def test_workers_lists_live_workers_and_all_with_the_dead():
    Worker.objects.register("w-live", WorkerInfo(hostname="h1", queues=["default"], concurrency=4))
    Worker.objects.register("w-dead", WorkerInfo(hostname="h2"))
    Worker.objects.filter(id="w-dead").update(declared_dead_at="2020-01-01T00:00:00Z")
    assert [w["id"] for w in ojs_json("workers")] == ["w-live"]
    assert [w["id"] for w in ojs_json("workers", "--all")] == ["w-dead", "w-live"]
    assert "w-live" in ojs("workers")


def test_what_clients_wrote_reaches_the_terminal_escaped():
    """A worker's id and hostname come from HTTP clients: an escape sequence among them is printed as
    text, not sent to the operator's terminal to run; --json says them exactly."""
    Worker.objects.register("w-\x1b[31mred", WorkerInfo(hostname="h\x1b]0;pwned\x07\nforged  row", queues=["default"]))
    printed = ojs("workers")
    assert "\x1b" not in printed and "\x07" not in printed
    assert "w-\\x1b[31mred" in printed and "h\\x1b]0;pwned\\x07\\nforged  row" in printed
    assert len(printed.splitlines()) == 2
    assert [w["hostname"] for w in ojs_json("workers")] == ["h\x1b]0;pwned\x07\nforged  row"]


def test_a_worker_silent_past_the_timeout_is_dead_whether_or_not_the_reaper_said_so_yet():
    # No reaper has declared it (it is down, or not yet ticked): every surface already says dead.
    Worker.objects.register("w-live", WorkerInfo(hostname="h1"))
    Worker.objects.register("w-silent", WorkerInfo(hostname="h2"))
    Worker.objects.filter(id="w-silent").update(last_heartbeat_at="2020-01-01T00:00:00Z")
    assert [w["id"] for w in ojs_json("workers")] == ["w-live"]
    assert [(w["id"], w["state"]) for w in ojs_json("workers", "--all")] == [("w-live", "running"), ("w-silent", "dead")]
    assert "w-silent" not in ojs("workers")
    # The text says the worker's own last word beside the state, as the JSON, the admin and the API do.
    header, silent = [line.split() for line in ojs("workers", "--all").splitlines() if "w-silent" in line or "ID" in line]
    assert dict(zip(header, silent, strict=False))["REPORTED_STATE"] == "running"


def test_a_usage_error_exits_2_from_the_command_line():
    # argparse's own exit, as a shell script sees it (no database needed).
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run(
        [sys.executable, "-m", "django", "ojs", "retry", "--limit", "0"], env=env, capture_output=True, text=True, check=False,
        timeout=120,
    )
    assert done.returncode == 2 and "--limit" in done.stderr


def test_delete_takes_finished_jobs_only_and_a_type_prefix_selects_a_family(push):
    done = push(type="email.send", options={"queue": "q"})
    Job.objects.cancel(done.id)
    waiting = push(type="email.digest", options={"queue": "q"})
    other = push(type="sms.send", options={"queue": "q"})
    Job.objects.cancel(other.id)
    report = ojs_json("delete", "--type", "email.*", "--yes")
    assert (report["moved"], report["matched"]) == (1, 1)
    assert set(Job.objects.values_list("pk", flat=True)) == {waiting.pk, other.pk}


def test_maintenance_shows_enters_and_leaves_as_the_admin_api_says(api):
    assert ojs_json("maintenance")["enabled"] is False
    entered = ojs_json("maintenance", "on", "--reason", "migration", "--for", "PT20M")
    assert entered["enabled"] and entered["reason"] == "migration" and entered["estimated_end"]
    said = api.get("/ojs/v1/admin/system/maintenance").json()
    assert (said["maintenance"], said["reason"], said["estimated_end"]) == (True, "migration", entered["estimated_end"])
    assert "migration" in ojs("maintenance")
    assert exit_code("maintenance", "on", "--for", "soon") == 1
    assert ojs_json("maintenance", "off")["enabled"] is False
    assert api.get("/ojs/v1/admin/system/maintenance").json()["maintenance"] is False


def test_wait_prints_the_result_of_a_completed_job_and_fails_on_a_timeout(transactional_db):
    job = django_ojs.enqueue("cli.wait", [], queue="waited")
    with pytest.raises(CommandError, match=r"still available after 0\.1 s"):
        ojs("wait", str(job.id), "--timeout", "0.1")
    [claimed] = Job.objects.fetch(["waited"], worker_id="w")
    Job.objects.ack(claimed.id, result={"n": 7}, lease=Lease("w"))
    assert ojs_json("wait", str(job.id)) == {"job_id": str(job.id), "state": "completed", "result": {"n": 7}}
