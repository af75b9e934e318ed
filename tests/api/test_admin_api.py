"""The admin API (ojs-admin-api) in process: what each endpoint answers, refuses, and changes.

The same endpoints on the wire, through gunicorn, with keys that hold the
scope and keys that lack it: ``test_admin_wire.py``.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection
from django.urls import reverse

from django_ojs.cli import reads
from django_ojs.conf import ojs_settings
from django_ojs.core import history, maintenance, maintenance_mode
from django_ojs.core.clock import db_now
from django_ojs.core.history import HOUR, MINUTE, hour_floor, minute_floor
from django_ojs.core.stats import state_counts
from django_ojs.models import Event, Job, JobError, Queue, StatsBucket, Worker, Workflow
from django_ojs.protocol.durations import format_timestamp
from django_ojs.protocol.failure import Failure
from tests.conftest import MEDIA_TYPE
from tests.helpers import ago, history_running_since, reload, row_held
from tests.waiting import PATIENCE

ADMIN = "/ojs/v1/admin"


def discarded(push, queue: str, *, type: str = "mail.send", args: list[Any] | None = None) -> Job:
    """A job of ``queue`` that failed its one attempt (one error in its history); the highest
    priority makes it the one FETCH takes from a queue that holds others."""
    job = push(type=type, args=args or [], priority=100, options={"queue": queue, "retry": {"max_attempts": 1}})
    [claimed] = Job.objects.fetch([queue], worker_id="w-fail")
    assert claimed.id == job.id
    return Job.objects.fail(job.id, Failure(type="SMTPError", message="connection refused"))


def send_raw(api, method: str, path: str, body: Any = None):
    """A request whose answer may be a 503 (maintenance mode), still checked for the binding's headers."""
    data = json.dumps(body) if body is not None else None
    kwargs = {"data": data, "content_type": MEDIA_TYPE} if data is not None else {}
    response = getattr(api.client, method)(path, **kwargs)
    assert response["OJS-Version"] == "1.0" and response["X-Request-Id"]
    return response


# -- queues (§6) --------------------------------------------------------------------------------


def test_queues_list_counts_throughput_and_state_as_the_admin_console_counts_them(api, push):
    for _ in range(3):
        push(options={"queue": "mail"})
    discarded(push, "mail")
    push(options={"queue": "sms"})
    Queue.objects.pause("sms")

    body = api.get(f"{ADMIN}/queues").json()

    by_name = {queue["name"]: queue for queue in body["items"]}
    assert set(by_name) == {"mail", "sms"}
    mail = by_name["mail"]
    assert (mail["state"], mail["paused"], mail["counts"]["available"], mail["counts"]["discarded"]) == (
        "active", False, 3, 1)
    assert mail["counts_estimated"] == [] and mail["throughput"]["failed_per_minute"] > 0
    assert (by_name["sms"]["state"], by_name["sms"]["paused"]) == ("paused", True)
    assert body["pagination"] == {"total": 2, "total_exact": True, "page": 1, "per_page": 20, "has_more": False}
    # The CLI's queue listing counts the same backlog.
    cli = {row["name"]: row["counts"] for row in reads.list_queues()}
    assert cli["mail"]["available"] == mail["counts"]["available"] and cli["mail"]["discarded"] == 1


def test_queues_page_by_number(api, push):
    for name in ("q1", "q2", "q3"):
        push(options={"queue": name})
    second = api.get(f"{ADMIN}/queues?per_page=2&page=2").json()
    assert [queue["name"] for queue in second["items"]] == ["q3"]
    assert second["pagination"]["page"] == 2 and not second["pagination"]["has_more"]


def test_queue_detail_has_its_configuration_and_an_unknown_queue_is_404(api, push):
    push(options={"queue": "mail"})
    Queue.objects.filter(name="mail").update(concurrency=4, max_size=100)
    body = api.get(f"{ADMIN}/queues/mail").json()
    assert body["configuration"]["concurrency"] == 4 and body["configuration"]["max_size"] == 100
    assert body["configuration"]["retention"]["completed"] == "PT168H"
    assert body["oldest_available_at"].endswith("Z")
    missing = api.get(f"{ADMIN}/queues/never-used")
    assert missing.status_code == 404 and missing.json()["error"]["details"]["resource_type"] == "queue"
    assert api.get(f"{ADMIN}/queues/Bad_Name").status_code == 400


def test_pause_stops_fetch_and_resume_restores_it(api, push):
    push(options={"queue": "mail"})
    paused = api.post(f"{ADMIN}/queues/mail/pause").json()
    assert paused["paused"] and paused["state"] == "paused" and paused["paused_at"].endswith("Z")
    assert Job.objects.fetch(["mail"]) == []
    assert api.post(f"{ADMIN}/queues/mail/resume").json()["paused"] is False
    assert len(Job.objects.fetch(["mail"])) == 1


def test_config_changes_the_settings_the_admins_queue_page_edits(api, push):
    push(options={"queue": "mail"})
    body = api.put(f"{ADMIN}/queues/mail/config",
                   {"concurrency": 2, "rate_limit": {"limit": 100, "period": "PT1M"}, "max_size": 50,
                    "overflow_policy": "drop_oldest"}).json()
    assert body["configuration"]["concurrency"] == 2 and body["configuration"]["overflow_policy"] == "drop_oldest"
    queue = Queue.objects.get(name="mail")
    assert (queue.concurrency, queue.rate_limit, queue.max_size) == (2, {"limit": 100, "period": "PT1M"}, 50)
    cleared = api.put(f"{ADMIN}/queues/mail/config", {"concurrency": None}).json()
    assert cleared["configuration"]["concurrency"] is None and cleared["configuration"]["max_size"] == 50


def test_config_is_the_store_the_admins_queue_page_edits_both_ways(api, push, admin_client):
    """A limit set over the API is what the console's queue page shows and edits; one saved there is what
    the API answers."""
    push(options={"queue": "mail"})
    api.put(f"{ADMIN}/queues/mail/config", {"concurrency": 3, "rate_limit": {"limit": 50, "period": "PT1M"},
                                             "max_size": 200, "overflow_policy": "drop_oldest"})
    configure = reverse("admin:django_ojs_queue_configure", args=["mail"])
    form = admin_client.get(configure).context["form"]
    assert {name: form[name].value() for name in ("concurrency", "rate_limit", "rate_period", "max_size",
                                                   "overflow_policy")} == {
        "concurrency": 3, "rate_limit": 50, "rate_period": "PT1M", "max_size": 200, "overflow_policy": "drop_oldest"}
    listing = admin_client.get(reverse("admin:django_ojs_queue_changelist")).content.decode()
    assert "0 / 3 active; rate 50 per PT1M; max size 200 (drop_oldest)" in listing

    saved = admin_client.post(configure, {"concurrency": "7", "throttle": "5", "throttle_period": "PT1S",
                                          "rate_period": "PT1M", "max_size": "", "overflow_policy": "reject"})
    assert saved.status_code == 302
    configuration = api.get(f"{ADMIN}/queues/mail").json()["configuration"]
    assert configuration == {"concurrency": 7, "rate_limit": None, "throttle": {"limit": 5, "period": "PT1S"},
                             "max_size": None, "overflow_policy": "reject", "fairness_key": None,
                             "fairness_weights": {}, "fairness_default_weight": 1,
                             "retention": configuration["retention"]}
def test_config_makes_a_queue_fair_and_its_waiting_jobs_take_turns(api, push):
    for tenant in ("big", "big", "big", "small"):
        push(meta={"tenant": tenant}, options={"queue": "mail"})
    body = api.put(f"{ADMIN}/queues/mail/config", {"fairness_key": "meta.tenant"}).json()
    assert body["configuration"]["fairness_key"] == "meta.tenant"
    assert [job.meta["tenant"] for job in Job.objects.fetch(["mail"], count=2)] == ["big", "small"]
    assert api.put(f"{ADMIN}/queues/mail/config", {"fairness_key": None}).json()["configuration"]["fairness_key"] is None


def test_config_weighs_a_fair_queues_values(api, push):
    for tenant in ("big",) * 4 + ("small",) * 2:
        push(meta={"tenant": tenant}, options={"queue": "mail"})
    body = api.put(f"{ADMIN}/queues/mail/config", {"fairness_key": "meta.tenant", "fairness_weights": {"big": 3},
                                                    "fairness_default_weight": 1}).json()
    assert (body["configuration"]["fairness_weights"], body["configuration"]["fairness_default_weight"]) == (
        {"big": 3}, 1)
    assert [job.meta["tenant"] for job in Job.objects.fetch(["mail"], count=5)] == ["big", "big", "big", "small", "big"]
    cleared = api.put(f"{ADMIN}/queues/mail/config", {"fairness_weights": None}).json()["configuration"]
    assert (cleared["fairness_key"], cleared["fairness_weights"]) == ("meta.tenant", {})


def test_queues_carry_the_autoscaling_signals(api, push):
    push(options={"queue": "mail"})
    Job.objects.filter(queue="mail").update(enqueued_at=ago(minutes=2))
    push(options={"queue": "empty"})
    Job.objects.filter(queue="empty").update(state="completed", finished_at=ago(minutes=1))
    by_name = {queue["name"]: queue for queue in api.get(f"{ADMIN}/queues").json()["items"]}
    # Waiting, and nothing finished in the last 5 minutes: no rate, so no estimate.
    assert by_name["mail"]["estimated_drain_seconds"] is None
    assert 115 <= by_name["mail"]["oldest_available_age_seconds"] <= 300
    assert (by_name["empty"]["estimated_drain_seconds"], by_name["empty"]["oldest_available_age_seconds"]) == (0, 0)
    detail = api.get(f"{ADMIN}/queues/mail").json()
    assert detail["estimated_drain_seconds"] is None and detail["oldest_available_age_seconds"] >= 115


@pytest.mark.parametrize("body", [
    {"retention": {"completed": "P14D"}}, {"concurrency": -1}, {"concurrency": "many"}, {"max_size": 0},
    {"overflow_policy": "block"}, {"rate_limit": {"limit": "x"}}, {"unknown": 1},
    {"fairness_key": "tenant"}, {"fairness_key": 3}, {"fairness_key": "meta.a.b"},
    {"fairness_weights": {"acme": 1.5}}, {"fairness_weights": {"acme": 0}}, {"fairness_weights": {"acme": "3"}},
    {"fairness_weights": [3]}, {"fairness_weights": {f"t{i}": 1 for i in range(1001)}},
    {"fairness_default_weight": 0}, {"fairness_default_weight": True},
])
def test_a_config_the_store_cannot_keep_is_400_and_changes_nothing(api, push, body):
    push(options={"queue": "mail"})
    before = list(Queue.objects.values())
    response = api.put(f"{ADMIN}/queues/mail/config", body)
    assert response.status_code == 400, response.json()
    assert list(Queue.objects.values()) == before


def test_purge_deletes_finished_jobs_of_the_queue_older_than_asked(api, push):
    old, recent = discarded(push, "mail"), discarded(push, "mail")
    other = discarded(push, "sms")
    waiting = push(options={"queue": "mail"})
    Job.objects.filter(pk=old.pk).update(finished_at=ago(days=10))
    body = {"states": ["discarded", "completed"], "older_than": (db_now() - dt.timedelta(days=7)).isoformat()}

    refused = api.delete(f"{ADMIN}/queues/mail/jobs", data=json.dumps(body), content_type=MEDIA_TYPE)
    assert refused.status_code == 400 and refused.json()["error"]["details"]["field"] == "confirm"
    assert Job.objects.filter(pk=old.pk).exists()

    purged = api.delete(f"{ADMIN}/queues/mail/jobs", data=json.dumps({**body, "confirm": True}),
                        content_type=MEDIA_TYPE).json()
    assert purged == {"purged_count": 1, "states": ["completed", "discarded"], "complete": True,
                      "skipped_by_reason": {}}
    assert set(Job.objects.values_list("pk", flat=True)) == {recent.pk, other.pk, waiting.pk}
    assert not JobError.objects.filter(job_id=old.pk).exists()


@pytest.mark.parametrize("states", [["available"], [], "discarded", ["nonsense"]])
def test_purge_takes_finished_states_only(api, push, states):
    push(options={"queue": "mail"})
    response = api.delete(f"{ADMIN}/queues/mail/jobs", data=json.dumps({"states": states, "confirm": True}),
                          content_type=MEDIA_TYPE)
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == "states"
    assert Job.objects.count() == 1


# -- jobs (§7) --------------------------------------------------------------------------------------


def test_jobs_list_filters_by_state_queue_type_time_and_search(api, push):
    a = push(type="email.send", args=[{"user_id": 42}], options={"queue": "mail"})
    b = push(type="email.digest", args=[{"user_id": 7}], options={"queue": "mail"})
    c = push(type="sms.send", options={"queue": "sms"})
    d = discarded(push, "mail", type="email.send")
    Job.objects.filter(pk=a.pk).update(created_at=ago(days=2))

    def ids(query: str) -> set[str]:
        response = api.get(f"{ADMIN}/jobs?{query}")
        assert response.status_code == 200, response.json()
        return {item["id"] for item in response.json()["items"]}

    assert ids("") == {str(job.id) for job in (a, b, c, d)}
    assert ids("state=discarded") == {str(d.id)}
    assert ids("state=available,discarded&queue=mail") == {str(a.id), str(b.id), str(d.id)}
    assert ids("type=email.send") == {str(a.id), str(d.id)}
    assert ids("type=email.*") == {str(a.id), str(b.id), str(d.id)}
    since = (db_now() - dt.timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert ids(f"since={since}") == {str(b.id), str(c.id), str(d.id)}
    assert ids(f"until={since}") == {str(a.id)}
    assert ids("search=args.user_id%3D42") == {str(a.id)}
    item = next(item for item in api.get(f"{ADMIN}/jobs?state=discarded").json()["items"])
    assert item["error"] == {"type": "SMTPError", "message": "connection refused"} and "args" not in item


@pytest.mark.parametrize("query", [
    "state=nonsense", "queue=Bad_Name", "since=yesterday", "until=2026-01-01", "per_page=0", "per_page=101",
    "page=0", "page=1000", "sort=args", "order=up", "cursor=forged", "search=args:{broken",
])
def test_bad_list_parameters_are_400(api, query):
    response = api.get(f"{ADMIN}/jobs?{query}")
    assert response.status_code == 400, (query, response.json())


def walk(api, query: str) -> list[dict[str, Any]]:
    """Every page of a listing, following next_cursor."""
    items: list[dict[str, Any]] = []
    body = api.get(f"{ADMIN}/jobs?{query}").json()
    while True:
        items += body["items"]
        cursor = body["pagination"].get("next_cursor")
        if cursor is None:
            return items
        body = api.get(f"{ADMIN}/jobs?{query}&cursor={cursor}").json()


def test_the_cursor_walks_every_job_once_in_each_sort_order(api, push):
    jobs = [push(priority=(index % 3) * 5, options={"queue": "q"}) for index in range(11)]
    scheduled = [push(options={"queue": "q", "delay_until": f"2099-01-0{day}T00:00:00Z"}) for day in (3, 1, 2)]
    everyone = jobs + scheduled

    newest_first = walk(api, "per_page=4")
    assert [item["id"] for item in newest_first] == [str(job.id) for job in reversed(everyone)]
    by_priority = walk(api, "per_page=4&sort=priority&order=asc")
    assert [item["priority"] for item in by_priority] == sorted(job.priority for job in everyone)
    assert len({item["id"] for item in by_priority}) == len(everyone)
    by_schedule = walk(api, "per_page=2&sort=scheduled_at&order=asc")
    assert [item["id"] for item in by_schedule[:3]] == [str(scheduled[i].id) for i in (1, 2, 0)]
    assert {item["id"] for item in by_schedule[3:]} == {str(job.id) for job in jobs}  # no schedule: last
    descending = walk(api, "per_page=2&sort=scheduled_at&order=desc")
    assert [item["id"] for item in descending[:3]] == [str(scheduled[i].id) for i in (0, 2, 1)]
    assert len(descending) == len(everyone)


@pytest.mark.parametrize("sort", ["created_at", "priority", "scheduled_at"])
@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("since", [False, True])
def test_pages_by_number_list_what_the_cursor_walks_across_jobs_with_and_without_a_schedule(
    api, push, claim, sort, order, since
):
    """Jobs with a schedule and without one are read apart (paging.Keyset.parts), and a creation time
    range partition by partition on PostgreSQL: a page that straddles them lists what the cursor does."""
    for index in range(7):
        push(priority=index % 3, options={"queue": "q", "delay_until": f"2099-01-0{index % 4 + 1}T00:00:00Z"})
        push(priority=index % 2, options={"queue": "q"})
    for _ in range(3):  # finished ones too, in their partitions
        Job.objects.ack(claim("w1").id)
    query = f"sort={sort}&order={order}" + (f"&since={quote('2020-01-01T00:00:00Z')}" if since else "")
    walked = [item["id"] for item in walk(api, f"per_page=3&{query}")]
    paged = [item["id"] for page in range(1, 8) for item in api.get(f"{ADMIN}/jobs?per_page=3&page={page}&{query}")
             .json()["items"]]
    assert len(walked) == 17 and paged == walked


def test_a_cursor_from_another_sort_is_refused(api, push):
    for _ in range(3):
        push(options={"queue": "q"})
    cursor = api.get(f"{ADMIN}/jobs?per_page=1").json()["pagination"]["next_cursor"]
    assert api.get(f"{ADMIN}/jobs?per_page=1&sort=priority&cursor={cursor}").status_code == 400
    assert api.get(f"{ADMIN}/jobs?per_page=1&page=2&cursor={cursor}").status_code == 400


def test_pages_by_number_and_the_total(api, push):
    jobs = [push(options={"queue": "q"}) for _ in range(5)]
    second = api.get(f"{ADMIN}/jobs?per_page=2&page=2").json()
    assert [item["id"] for item in second["items"]] == [str(jobs[2].id), str(jobs[1].id)]
    assert second["pagination"] == {"total": 5, "total_exact": True, "page": 2, "per_page": 2, "has_more": True,
                                    "next_cursor": second["pagination"]["next_cursor"]}
    assert api.get(f"{ADMIN}/jobs?limit=2&offset=4").json()["items"][0]["id"] == str(jobs[0].id)


def test_job_detail_has_its_envelope_error_history_and_events(api, push):
    job = push(type="mail.send", args=["a"], meta={"tenant_id": "acme"},
               options={"queue": "mail", "retry": {"max_attempts": 2}})
    Job.objects.fetch(["mail"], worker_id="w1")
    Job.objects.fail(job.id, Failure(type="Timeout", message="slow"), requeue=True)
    body = api.get(f"{ADMIN}/jobs/{job.id}").json()
    assert (body["id"], body["type"], body["args"], body["meta"]) == (str(job.id), "mail.send", ["a"], {"tenant_id": "acme"})
    assert [(entry["attempt"], entry["type"]) for entry in body["errors"]] == [(1, "Timeout")]
    assert [event["type"] for event in body["events"]][:2] == ["job.enqueued", "job.started"]
    assert body["metadata"]["created_at"] == body["created_at"] and body["metadata"]["discarded_at"] is None
    assert api.get(f"{ADMIN}/jobs/019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f").status_code == 404
    assert api.get(f"{ADMIN}/jobs/not-a-uuid").status_code == 400


def test_cancel_a_waiting_job_and_a_finished_one_is_unchanged(api, push):
    job = push(options={"queue": "q"})
    body = api.post(f"{ADMIN}/jobs/{job.id}/cancel").json()
    assert (body["job"]["state"], body["previous_state"], body["cancelled"]) == ("cancelled", "available", True)
    again = api.post(f"{ADMIN}/jobs/{job.id}/cancel").json()
    assert (again["job"]["state"], again["previous_state"], again["cancelled"]) == ("cancelled", None, False)


def test_retry_brings_a_discarded_job_back_and_refuses_a_cancelled_one(api, push):
    failed = discarded(push, "mail")
    body = api.post(f"{ADMIN}/jobs/{failed.id}/retry").json()
    assert (body["job"]["state"], body["job"]["attempt"]) == ("available", 0)
    assert [entry["type"] for entry in api.get(f"{ADMIN}/jobs/{failed.id}").json()["errors"]] == ["SMTPError"]
    cancelled = push(options={"queue": "q"})
    Job.objects.cancel(cancelled.id)
    refused = api.post(f"{ADMIN}/jobs/{cancelled.id}/retry")
    assert refused.status_code == 409 and refused.json()["error"]["details"]["current_state"] == "cancelled"
    missing = api.post(f"{ADMIN}/jobs/019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f/retry")
    assert missing.status_code == 404 and "job 019461a8" in missing.json()["error"]["message"]


# -- bulk moves (§8) ---------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["retry", "cancel", "delete"])
@pytest.mark.parametrize("confirm", [None, False, "true", 1])
def test_a_bulk_move_without_confirm_true_is_400_and_moves_nothing(api, push, action, confirm):
    discarded(push, "mail")
    push(options={"queue": "mail"})
    before = list(Job.objects.order_by("pk").values("pk", "state"))
    body: dict[str, Any] = {"filter": {"queue": "mail"}}
    if confirm is not None:
        body["confirm"] = confirm
    response = api.post(f"{ADMIN}/jobs/bulk/{action}", body)
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == "confirm"
    assert list(Job.objects.order_by("pk").values("pk", "state")) == before


def test_bulk_retry_moves_the_matching_discarded_jobs(api, push):
    mail = [discarded(push, "mail", type="invoice.generate") for _ in range(3)]
    other = discarded(push, "mail", type="email.send")
    body = api.post(f"{ADMIN}/jobs/bulk/retry",
                    {"filter": {"queue": "mail", "state": "discarded", "type": "invoice.generate"},
                     "confirm": True}).json()
    assert (body["action"], body["matched"], body["succeeded"], body["failed"], body["retried"]) == (
        "retry", 3, 3, 0, 3)
    assert body["errors"] == [] and body["complete"]
    assert {reload(job).state for job in mail} == {"available"} and reload(other).state == "discarded"


def test_bulk_cancel_and_delete_take_only_the_states_they_may_leave(api, push):
    waiting = [push(options={"queue": "mail"}) for _ in range(2)]
    finished = discarded(push, "mail")
    cancelled = api.post(f"{ADMIN}/jobs/bulk/cancel", {"filter": {"queue": "mail"}, "confirm": True}).json()
    assert (cancelled["succeeded"], cancelled["matched"]) == (2, 2)
    assert {reload(job).state for job in waiting} == {"cancelled"} and reload(finished).state == "discarded"
    deleted = api.post(f"{ADMIN}/jobs/bulk/delete", {"filter": {"queue": "mail", "state": "cancelled"},
                                                      "confirm": True}).json()
    assert deleted["succeeded"] == 2 and list(Job.objects.values_list("pk", flat=True)) == [finished.pk]
    # openapi's spelling: the filter's fields beside confirm.
    assert api.post(f"{ADMIN}/jobs/bulk/delete", {"queue": "mail", "confirm": True}).json()["succeeded"] == 1
    assert not Job.objects.exists()


@pytest.mark.parametrize("body", [
    {"filter": [], "confirm": True}, {"filter": {"colour": "red"}, "confirm": True},
    {"filter": {"state": 7}, "confirm": True}, {"filter": {"state": "gone"}, "confirm": True},
    {"filter": {"since": "last week"}, "confirm": True},
])
def test_a_bulk_filter_the_server_cannot_read_is_400(api, push, body):
    discarded(push, "mail")
    assert api.post(f"{ADMIN}/jobs/bulk/retry", body).status_code == 400
    assert Job.objects.get().state == "discarded"


def test_an_unknown_bulk_action_is_404(api, db):
    response = api.post(f"{ADMIN}/jobs/bulk/purge", {"confirm": True})
    assert response.status_code == 404 and "retry, cancel, delete" in response.json()["error"]["message"]


@pytest.mark.postgres
def test_a_bulk_move_skips_a_job_another_transaction_holds_and_names_it(transactional_db, api, push):
    held, free = discarded(push, "mail"), discarded(push, "mail")
    with row_held(held, PATIENCE):
        body = api.post(f"{ADMIN}/jobs/bulk/retry", {"filter": {"queue": "mail"}, "confirm": True}).json()
    assert (body["succeeded"], body["failed"], body["skipped_by_reason"]) == (1, 1, {"busy": 1})
    assert body["errors"][0]["job_id"] == str(held.id) and body["errors"][0]["reason"] == "busy"
    assert reload(free).state == "available" and reload(held).state == "discarded"


# -- workers (§9) -----------------------------------------------------------------------------------


def test_workers_list_says_each_state_and_counts_held_jobs_from_the_jobs_table(api, claim):
    Worker.objects.register("w-run")
    Worker.objects.register("w-quiet")
    Worker.objects.register("w-dead")
    Worker.objects.register("w-going")
    claim("w-run")
    claim("w-run")
    Worker.objects.set_directive(["w-quiet"], "quiet")
    Worker.objects.beat("w-quiet", state="quiet")
    Worker.objects.beat("w-going", state="terminate")  # SIGTERM: finishing its jobs
    Worker.objects.filter(pk="w-dead").update(last_heartbeat_at=ago(minutes=5))
    Worker.objects.filter(pk="w-run").update(active_jobs=9)  # what a heartbeat said earlier

    body = api.get(f"{ADMIN}/workers").json()

    by_id = {worker["id"]: worker for worker in body["items"]}
    assert {key: by_id[key]["state"] for key in by_id} == {
        "w-run": "running", "w-quiet": "quiet", "w-dead": "dead", "w-going": "draining"}
    assert by_id["w-going"]["reported_state"] == "terminate"
    assert by_id["w-run"]["active_jobs"] == 2
    assert body["summary"] == {"total": 4, "running": 1, "quiet": 1, "draining": 1, "dead": 1}
    detail = api.get(f"{ADMIN}/workers/w-run").json()
    assert len(detail["jobs"]) == 2 and {job["state"] for job in detail["jobs"]} == {"active"}
    assert api.get(f"{ADMIN}/workers/nobody").status_code == 404


def test_quiet_reaches_the_worker_in_its_next_heartbeat_reply(api, db):
    Worker.objects.register("w1")
    body = api.post(f"{ADMIN}/workers/w1/quiet").json()
    assert (body["directive"], body["state"]) == ("quiet", "running")  # asked, not yet applied
    assert Worker.objects.beat("w1").directive == "quiet"
    assert api.post(f"{ADMIN}/workers/nobody/quiet").status_code == 404


def test_quiet_refuses_a_dead_or_terminating_worker(api, db):
    Worker.objects.register("w-dead")
    Worker.objects.filter(pk="w-dead").update(last_heartbeat_at=ago(minutes=5))
    Worker.objects.register("w-going")
    Worker.objects.set_directive(["w-going"], "terminate")
    for worker in ("w-dead", "w-going"):
        response = api.post(f"{ADMIN}/workers/{worker}/quiet")
        assert response.status_code == 409 and response.json()["error"]["code"] == "conflict"
        # The hint speaks of the worker, not of a job's state (the conflict code's usual hint).
        assert "worker" in response.json()["error"]["hint"] and "job" not in response.json()["error"]["hint"]
    assert Worker.objects.get(pk="w-dead").directive == "running"


def test_deregister_refuses_a_live_worker_and_requeues_a_dead_ones_jobs(api, claim):
    Worker.objects.register("w1")
    held = claim("w1")
    assert api.delete(f"{ADMIN}/workers/w1").status_code == 409
    assert Worker.objects.filter(pk="w1").exists() and reload(held).state == "active"
    Worker.objects.filter(pk="w1").update(last_heartbeat_at=ago(minutes=5))
    body = api.delete(f"{ADMIN}/workers/w1").json()
    assert body == {"deregistered": True, "id": "w1", "jobs_requeued": 1}
    assert not Worker.objects.filter(pk="w1").exists() and reload(held).state == "available"


# -- statistics (§10) ---------------------------------------------------------------------------------


def test_stats_count_jobs_as_the_overview_does(api, push):
    for _ in range(2):
        push(options={"queue": "a"})
    discarded(push, "b")
    Worker.objects.register("w1")
    body = api.get(f"{ADMIN}/stats").json()
    assert body["jobs"] == {state: tally.value for state, tally in state_counts().items()}
    assert (body["jobs"]["available"], body["jobs"]["discarded"], body["queues"], body["workers"]) == (2, 1, 2, 1)
    assert body["throughput"]["failed_per_minute"] > 0 and body["maintenance"] is False


def test_history_answers_what_the_overview_chart_draws(api, push):
    now = db_now()
    history_running_since(minute_floor(now) - dt.timedelta(days=2))
    minute = minute_floor(now) - dt.timedelta(minutes=10)
    StatsBucket.objects.create(span=MINUTE, start=minute, queue="mail", transition="completed", count=7)
    StatsBucket.objects.create(span=MINUTE, start=minute, queue="sms", transition="discarded", count=2)
    StatsBucket.objects.create(span=MINUTE, start=minute, queue="sms", transition="enqueued", count=9)

    since = (minute - dt.timedelta(minutes=2)).isoformat().replace("+00:00", "Z")
    body = api.get(f"{ADMIN}/stats/history?period=1m&since={since}").json()
    point = next(point for point in body["data"] if point["timestamp"] == format_timestamp(minute))
    assert point == {"timestamp": point["timestamp"], "processed": 7, "failed": 2, "enqueued": 9, "retried": 0,
                     "cancelled": 0}
    assert body["period"] == "1m" and body["counted_through"] is not None
    sms = api.get(f"{ADMIN}/stats/history?period=5m&queue=sms&since={since}").json()
    assert sum(p["processed"] for p in sms["data"]) == 0 and sum(p["failed"] for p in sms["data"]) == 2
    # The chart of the overview reads the same function.
    chart = history.latest("1m", 60, now)
    assert chart.values["completed"][chart.slots.index(minute)] == 7


def test_a_day_of_minutes_and_thirty_days_of_hours_by_queue_and_transition_as_the_reaper_wrote_them(api, push, ojs):
    """§10.2: at least 24 h of minutes and 30 days of hours. The reaper, back after two days, counts the
    minutes of jobs that finished over them; the hours before were left by the reaper of earlier days."""
    ojs(EVENTS=True, RETENTION={**ojs_settings.RETENTION, "history_minutes": 2 * 86400, "history_hours": 35 * 86400})
    now = db_now()
    stopped = minute_floor(now) - dt.timedelta(hours=47)
    history_running_since(stopped - dt.timedelta(days=31), counted_through=stopped)
    earlier = [hour_floor(stopped) - dt.timedelta(hours=index) for index in range(1, 29 * 24)]
    StatsBucket.objects.bulk_create(StatsBucket(span=HOUR, start=at, queue="mail", transition="completed", count=4)
                                    for at in earlier)
    finished: dict[str, list[dt.datetime]] = {"mail": [], "sms": []}
    for index in range(47):
        queue = "mail" if index % 3 else "sms"
        job = push(options={"queue": queue})
        at = stopped + dt.timedelta(hours=index, minutes=7 + index % 50, seconds=15)
        Job.objects.filter(pk=job.pk).update(state="completed", finished_at=at)
        Event.objects.filter(job_id=job.id).update(time=at)
        finished[queue].append(minute_floor(at))

    while maintenance.record_history(1000):
        pass

    def read(query: str) -> dict[str, Any]:
        response = api.get(f"{ADMIN}/stats/history?{query}")
        assert response.status_code == 200, response.json()
        return response.json()

    def stamp(at: dt.datetime) -> str:
        return quote(at.strftime("%Y-%m-%dT%H:%M:%SZ"))

    day = read(f"period=1m&since={stamp(now - dt.timedelta(hours=24))}&queue=mail")
    assert len(day["data"]) >= 24 * 60 and None not in {point["processed"] for point in day["data"][:-2]}
    completed = {point["timestamp"]: point["processed"] for point in day["data"] if point["processed"]}
    recent = [at for at in finished["mail"] if at >= minute_floor(now - dt.timedelta(hours=24))]
    assert completed == {format_timestamp(at): 1 for at in recent}
    enqueued = {point["timestamp"]: point["enqueued"] for point in day["data"] if point["enqueued"]}
    assert enqueued == completed  # each job's events were set to the minute it finished

    month = read(f"period=1h&since={stamp(now - dt.timedelta(days=30))}")
    assert len(month["data"]) >= 30 * 24 and month["data"][0]["processed"] == 4  # the hours of earlier days
    by_hour = {point["timestamp"]: point["processed"] for point in month["data"]}
    for at in finished["mail"] + finished["sms"]:  # each of the last two days' hours: its one job
        assert by_hour[format_timestamp(hour_floor(at))] == 1
    sms = read(f"period=1d&since={stamp(now - dt.timedelta(days=29))}&queue=sms")
    assert sum(point["processed"] or 0 for point in sms["data"]) == len(finished["sms"])
    assert not StatsBucket.objects.filter(span=MINUTE, start__lt=now - dt.timedelta(days=2)).exists()


@pytest.mark.parametrize("query", ["period=2m", "period=1m&since=2020-01-01T00:00:00Z", "since=x", "queue=Bad_Name",
                                   "since=2030-01-01T00:00:00Z&until=2029-01-01T00:00:00Z"])
def test_bad_history_parameters_are_400(api, query):
    assert api.get(f"{ADMIN}/stats/history?{query}").status_code == 400


# -- the system (§12) -------------------------------------------------------------------------------


def test_maintenance_mode_refuses_http_push_empties_fetch_and_every_surface_says_so(api, push, make_client):
    push(options={"queue": "q"})
    body = api.post(f"{ADMIN}/system/maintenance",
                    {"enabled": True, "reason": "database migration", "estimated_duration": "PT30M"}).json()
    assert body["maintenance"] and body["reason"] == "database migration"
    assert dt.datetime.fromisoformat(body["estimated_end"]) - dt.datetime.fromisoformat(body["enabled_at"]) == \
        dt.timedelta(minutes=30)

    for path, payload in (("/ojs/v1/jobs", {"type": "a", "args": []}),
                          ("/ojs/v1/jobs/batch", {"jobs": [{"type": "a", "args": []}]}),
                          ("/ojs/v1/workflows", {"type": "chain", "name": "w", "steps": [{"type": "a", "args": []}]})):
        refused = send_raw(api, "post", path, payload)
        assert refused.status_code == 503 and 1700 <= int(refused["Retry-After"]) <= 1800, path
        assert refused.json()["error"]["code"] == "backend_unavailable"
    assert Job.objects.count() == 1 and not Workflow.objects.exists()
    worker = make_client("worker")
    assert worker.post("/ojs/v1/workers/fetch", {"queues": ["q"]}).json()["jobs"] == []
    health = api.get("/ojs/v1/health")
    assert health.status_code == 200 and health.json()["maintenance"]["enabled"] is True
    assert api.get(f"{ADMIN}/system/maintenance").json()["reason"] == "database migration"
    assert api.get(f"{ADMIN}/stats").json()["maintenance"] is True

    assert api.post(f"{ADMIN}/system/maintenance", {"enabled": False}).json()["maintenance"] is False
    assert api.post("/ojs/v1/jobs", {"type": "a", "args": [], "options": {"queue": "q"}}).status_code == 201
    # The workflow refused above was a valid one.
    assert api.post("/ojs/v1/workflows", {"type": "chain", "name": "w", "steps": [
        {"type": "a", "args": [], "options": {"queue": "later"}}]}).status_code == 201
    assert len(worker.post("/ojs/v1/workers/fetch", {"queues": ["q"], "count": 5}).json()["jobs"]) == 2


@pytest.mark.parametrize("body", [
    {}, {"enabled": "yes"}, {"enabled": True, "reason": 5}, {"enabled": True, "reason": "x" * 1001},
    {"enabled": True, "estimated_duration": "soon"}, {"enabled": True, "estimated_duration": "P400D"},
    {"enabled": True, "until": "tomorrow"},
])
def test_a_maintenance_request_the_server_cannot_read_is_400_and_changes_nothing(api, db, body):
    assert api.post(f"{ADMIN}/system/maintenance", body).status_code == 400
    assert maintenance_mode.current(fresh=True) == maintenance_mode.OFF


def test_config_shows_the_settings_in_effect_and_no_secret(api, make_client, settings, monkeypatch):
    settings.OJS = {**settings.OJS, "HEARTBEAT_TIMEOUT": 45}
    monkeypatch.setitem(connection.settings_dict, "PASSWORD", "pg-s3cret-pw")
    secret_key = make_client("enqueue").client._credentials["HTTP_AUTHORIZATION"].split()[1]
    response = api.get(f"{ADMIN}/system/config")
    body = response.json()
    assert body["settings"]["HEARTBEAT_TIMEOUT"] == 45 and body["settings"]["RETENTION"]["history_hours"] > 0
    assert body["backend"]["vendor"] == connection.vendor and "engine" in body
    text = response.content.decode()
    assert "pg-s3cret-pw" not in text and secret_key not in text and settings.SECRET_KEY not in text


def test_the_config_hides_what_its_name_calls_secret_and_credentials_in_urls():
    from django_ojs.api.admin.system import HIDDEN, public

    assert public("X", {"db_password": "p", "token": "t", "url": "postgres://u:pw@db:5432/x", "n": 1}) == {
        "db_password": HIDDEN, "token": HIDDEN, "url": "postgres://db:5432/x", "n": 1}
    assert public("API_KEY_CACHE_SECONDS", 5) == 5 and public("WEBHOOK_API_KEY", "k") == HIDDEN


def test_the_manifest_announces_the_admin_api_and_the_extensions_served(api):
    body = api.get("/ojs/manifest").json()
    assert {"admin-api", "dead-letter", "graceful-shutdown", "queue-config", "rate-limiting"} <= set(
        body["extensions"])
    assert body["endpoints"]["admin"] == "/ojs/v1/admin"
    assert body["capabilities"]["admin_api"]["sections"][:2] == ["queues", "jobs"]


# -- access (§13) -------------------------------------------------------------------------------------

# Every endpoint with keys that hold its scope and keys that lack it: test_admin_wire.py, on the wire.


def test_an_unknown_admin_path_is_404_in_the_binding_error_format(api):
    response = api.get(f"{ADMIN}/no-such-section")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
