"""What each page shows: the lists, their filters and search, a job's page, the overview."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib import admin
from django.db import connection
from django.urls import reverse

from django_ojs.admin import counting
from django_ojs.core import maintenance_mode
from django_ojs.core.clock import db_now
from django_ojs.core.history import hour_floor, minute_floor
from django_ojs.core.types import Lease
from django_ojs.keys import hash_key
from django_ojs.models import ApiKey, Job, Queue, StatsBucket, Worker
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.states import WorkerState
from tests.helpers import history_running_since


def listed(response) -> list[str]:
    """The job ids a list page shows, top to bottom (each whole in its short id's title)."""
    return re.findall(r'<code class="ojs-id" title="([0-9a-f-]{36})">', response.content.decode())


def jobs_page(client, **params) -> list[str]:
    response = client.get(reverse("admin:django_ojs_job_changelist"), params)
    assert response.status_code == 200
    return listed(response)


# -- the Jobs list ---------------------------------------------------------------------


def test_jobs_are_listed_newest_first(admin_client, make_job):
    first, second, third = (make_job("available") for _ in range(3))
    assert jobs_page(admin_client) == [str(third.id), str(second.id), str(first.id)]


def test_filters_by_state_queue_type_priority_and_worker(admin_client, make_job):
    active = make_job("active", queue="mail", type="email.send")
    urgent = make_job("available", queue="mail", type="email.send", priority=9)
    other_type = make_job("available", queue="mail", type="email.digest")
    elsewhere = make_job("available", queue="billing", type="invoice.render")

    assert jobs_page(admin_client, state="active") == [str(active.id)]
    assert set(jobs_page(admin_client, queue="mail")) == {str(active.id), str(urgent.id), str(other_type.id)}
    assert jobs_page(admin_client, queue="mail", type="email.digest") == [str(other_type.id)]
    assert jobs_page(admin_client, priority="9") == [str(urgent.id)]
    assert jobs_page(admin_client, worker_id="worker-under-test") == [str(active.id)]
    assert jobs_page(admin_client, type="invoice.render", state="available") == [str(elsewhere.id)]


def test_sidebar_offers_known_types_queues_and_priorities(admin_client, make_job):
    make_job("available", queue="mail", type="email.send", priority=3)
    make_job("available", queue="billing", type="invoice.render")
    page = admin_client.get(reverse("admin:django_ojs_job_changelist")).content.decode()
    for choice in ("?type=email.send", "?type=invoice.render", "?queue=billing", "?queue=mail", "?priority=3"):
        assert choice in page


def test_search_by_id_type_and_meta_values(admin_client, make_job):
    acme = make_job("available", meta={"tenant_id": "acme", "correlation_id": "req-42"})
    globex = make_job("available", type="invoice.render", meta={"tenant_id": "globex", "shard": 7})
    plain = make_job("available")

    assert jobs_page(admin_client, q=str(plain.id)) == [str(plain.id)]
    assert jobs_page(admin_client, q="acme") == [str(acme.id)]
    assert jobs_page(admin_client, q="req-42") == [str(acme.id)]
    assert jobs_page(admin_client, q="invoice.render") == [str(globex.id)]
    assert jobs_page(admin_client, q="tenant_id:globex") == [str(globex.id)]
    assert jobs_page(admin_client, q="shard=7") == [str(globex.id)]
    assert jobs_page(admin_client, q="nobody") == []


def test_list_columns_answer_what_is_happening(admin_client, make_job):
    make_job("discarded", failures=2)
    page = admin_client.get(reverse("admin:django_ojs_job_changelist")).content.decode()
    assert "ojs-state-discarded" in page
    # attempts: the second, of three allowed; the setup released the first (uncharged) to fail it again
    assert "2 (1 / 3 charged)" in page
    assert "ConnectionError</code> connection refused to smtp:25 (attempt 2)" in page


@pytest.mark.postgres
def test_big_tables_get_an_estimated_count_and_bounded_pages(admin_client, make_job, monkeypatch):
    """Past the exact-count bound the count is the planner's, and pages stop where the bound proved rows exist."""
    from django_ojs.admin.jobs import JobAdmin

    monkeypatch.setattr(counting.EstimatedCountPaginator, "exact_count_limit", 3)
    monkeypatch.setattr(JobAdmin, "list_per_page", 2)
    for _ in range(7):
        make_job("available")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_ojs_job")

    page = admin_client.get(reverse("admin:django_ojs_job_changelist"))

    paginator = page.context["cl"].paginator
    assert not paginator.tally.exact and paginator.tally.value > 3
    assert paginator.num_pages == 2
    text = page.content.decode()
    assert "an estimate; the pages reach the first 4" in text
    # "Select all" says the estimate as one too, never as a bare exact figure.
    estimate = f"{paginator.tally}"
    assert f"Select all {estimate} jobs (an estimate)" in text and f"All {estimate} selected (an estimate)" in text
    assert not re.search(r"Select all \d", text) and not re.search(r"All \d+ selected", text)
    last = admin_client.get(reverse("admin:django_ojs_job_changelist"), {"p": 2})
    assert len(listed(last)) == 2


def test_small_tables_are_counted_exactly(admin_client, make_job):
    make_job("available")
    page = admin_client.get(reverse("admin:django_ojs_job_changelist"))
    assert page.context["cl"].paginator.tally == counting.Tally(1, True)
    assert "an estimate" not in page.content.decode()


# -- a job's page ---------------------------------------------------------------------


def test_job_page_shows_timeline_error_history_and_folded_backtraces(admin_client, make_job):
    job = make_job("discarded", failures=3, backtrace=["frame one", "frame <two>"], meta={"tenant_id": "acme"})

    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[job.pk])).content.decode()

    for moment in ("created", "enqueued", "started", "discarded"):
        assert f"<th>{moment}</th>" in page
    assert page.count('<li class="ojs-error">') == 3
    assert page.count("<summary>Backtrace (2 frames)</summary>") == 3
    assert "frame &lt;two&gt;" in page
    assert "connection refused to smtp:25 (attempt 3)" in page
    assert "not retryable" in page
    assert '&quot;tenant_id&quot;: &quot;acme&quot;' in page


def test_a_job_page_answers_to_the_jobs_ojs_id(admin_client, make_job):
    job = make_job("available", meta={"tenant_id": "by-uuid"})
    make_job("available")  # another job: the id must pick the right one

    page = admin_client.get(f"/admin/django_ojs/job/{job.id}/change/")

    assert page.status_code == 200
    assert str(job.id) in page.content.decode() and "by-uuid" in page.content.decode()
    assert admin_client.get(f"/admin/django_ojs/job/{job.id}/move/cancel/").status_code != 404
    unknown = admin_client.get("/admin/django_ojs/job/01234567-89ab-7def-8123-456789abcdef/change/", follow=True)
    assert "doesn’t exist" in unknown.content.decode() or "does not exist" in unknown.content.decode()


def test_job_page_shows_who_holds_an_active_job_and_until_when(admin_client, make_job, make_worker):
    make_worker("worker-under-test")
    job = make_job("active")

    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[job.pk])).content.decode()

    assert reverse("admin:django_ojs_worker_change", args=["worker-under-test"]) in page
    assert "<th>visibility deadline</th>" in page


def test_huge_arguments_are_cut(admin_client, make_job):
    job = make_job("available", args=["x" * 100_000])
    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[job.pk])).content.decode()
    assert "Cut at 20,000 of 100," in page
    assert len(page) < 60_000


# -- Failed jobs, workers, queues, overview, API keys ------------------------------------------


def test_failed_jobs_lists_only_discarded_jobs_newest_discard_first(admin_client, make_job):
    older = make_job("discarded")
    make_job("completed", queue="other")
    newer = make_job("discarded", queue="third")
    page = admin_client.get(reverse("admin:django_ojs_deadletterjob_changelist"))
    assert listed(page) == [str(newer.id), str(older.id)]
    assert b"ConnectionError" in page.content


def test_dead_letter_filters_by_last_error_type(admin_client, make_job):
    dead = make_job("discarded")
    url = reverse("admin:django_ojs_deadletterjob_changelist")
    assert listed(admin_client.get(url, {"error_type": "ConnectionError"})) == [str(dead.id)]
    assert listed(admin_client.get(url, {"error_type": "TimeoutError"})) == []


def test_workers_page_marks_dead_workers_and_applied_directives(admin_client, make_worker):
    alive = make_worker("w-alive")
    Worker.objects.set_directive([alive.pk], WorkerState.QUIET)
    Worker.objects.beat(alive.pk, state=WorkerState.QUIET)
    asked = make_worker("w-asked")
    Worker.objects.set_directive([asked.pk], WorkerState.TERMINATE)
    dead = make_worker("w-dead")
    Worker.objects.filter(pk=dead.pk).update(last_heartbeat_at=dead.last_heartbeat_at - dt.timedelta(minutes=2))

    rows = admin_client.get(reverse("admin:django_ojs_worker_live")).json()["rows"]

    assert "applied" in rows["w-alive"]["directive_status"]
    assert "not applied yet" in rows["w-asked"]["directive_status"]
    assert "ojs-worker-dead" in rows["w-dead"]["reported_state"]
    assert "ojs-worker-dead" not in rows["w-alive"]["reported_state"]
    page = admin_client.get(reverse("admin:django_ojs_worker_changelist")).content.decode()
    assert 'data-ojs-live-url="/admin/django_ojs/worker/live/"' in page
    assert 'data-pk="w-dead"' in page


def test_a_dead_workers_up_for_stops_at_its_last_heartbeat(admin_client, make_worker, api):
    now = db_now()
    for worker_id in ("w-live", "w-declared", "w-silent"):
        make_worker(worker_id)
    Worker.objects.update(started_at=now - dt.timedelta(hours=3))
    # One declared dead by the reaper, one silent past HEARTBEAT_TIMEOUT and not declared yet.
    Worker.objects.filter(pk="w-declared").update(
        last_heartbeat_at=now - dt.timedelta(hours=1), declared_dead_at=now - dt.timedelta(minutes=59)
    )
    Worker.objects.filter(pk="w-silent").update(last_heartbeat_at=now - dt.timedelta(hours=1, minutes=30))
    said = {w["id"]: w["state"] for w in api.get("/ojs/v1/admin/workers").json()["items"]}
    assert said == {"w-live": "running", "w-declared": "dead", "w-silent": "dead"}

    page = admin_client.get(reverse("admin:django_ojs_worker_changelist")).content.decode()
    rows = re.findall(r'<tr.*?data-pk="([^"]+)".*?<td class="field-uptime">(.*?)</td>', page, re.S)
    up_for = {pk: re.sub(r"<[^>]+>", "", cell) for pk, cell in rows}
    assert up_for == {"w-live": "3 h", "w-declared": "was up 2 h", "w-silent": "was up 1 h 30 min"}


def test_queues_page_counts_by_state_and_shows_the_oldest_waiting_job(admin_client, make_job):
    make_job("discarded", queue="mail")
    make_job("available", queue="mail")
    make_job("available", queue="mail")
    Queue.objects.pause("mail")

    page = admin_client.get(reverse("admin:django_ojs_queue_changelist"))

    mail = next(queue for queue in page.context["cl"].result_list if queue.name == "mail")
    assert mail.figures.counts["available"] == counting.Tally(2, True)
    assert mail.figures.counts["discarded"] == counting.Tally(1, True)
    assert mail.figures.oldest_available_at is not None and mail.figures.oldest_exact
    text = page.content.decode()
    assert "?queue=mail&amp;state=available" in text
    assert 'class="ojs-paused"' in text


def test_overview_counts_charts_and_flags_what_needs_attention(admin_client, make_job, make_worker):
    history_running_since(minute_floor(db_now()) - dt.timedelta(hours=2))
    make_job("completed")
    make_job("discarded", queue="mail")
    Queue.objects.pause("mail")
    dead = make_worker("w-dead")
    Worker.objects.filter(pk=dead.pk).update(last_heartbeat_at=dead.last_heartbeat_at - dt.timedelta(minutes=2))

    page = admin_client.get(reverse("admin:django_ojs_overview_changelist"))

    assert page.status_code == 200
    text = page.content.decode()
    counts = {item["state"]: item["tally"] for item in page.context["states"]}
    assert counts["completed"] == counting.Tally(1, True) and counts["available"] == counting.Tally(0, True)
    assert '<svg class="ojs-chart"' in text and 'class="ojs-bar-completed"' in text
    assert "1 completed, 1 failed (discarded)" in text
    assert re.search(r"Queue mail paused for \d+ s, not handing out jobs: 0 job\(s\) waiting\.", text)
    assert "1 worker(s) silent for over 30 s" in text
    assert 'data-pk="w-dead"' in text


def test_the_overview_names_unread_queues_long_waits_and_says_nothing_when_all_is_well(
    admin_client, make_job, make_worker
):
    from django_ojs.models import Job, ReaperTick

    now = db_now()
    ReaperTick.objects.create(id="reaper-1", started_at=now, last_tick_at=now)
    make_worker("w1", queues=["default"])
    url = reverse("admin:django_ojs_overview_changelist")
    text = admin_client.get(url).content.decode()
    assert "Nothing: no job discarded in the last hour" in text
    assert 'data-reaper="ticking"' in text and "Reaper: last tick at" in text

    waiting = make_job("available", queue="nobody-reads")
    Job.objects.filter(pk=waiting.pk).update(enqueued_at=now - dt.timedelta(minutes=7))
    text = admin_client.get(url).content.decode()
    assert "1 job(s) waiting on queue nobody-reads, and no live worker reads it." in text
    assert "Queue nobody-reads: its oldest waiting job has waited 7 min" in text
    assert "state=available&amp;queue=nobody-reads" in text

    # A pause forgotten: how long, and what waits behind it.
    make_job("available", queue="held")
    Queue.objects.pause("held")
    Queue.objects.filter(pk="held").update(paused_at=now - dt.timedelta(hours=3))
    text = admin_client.get(url).content.decode()
    assert "Queue held paused for 3 h, not handing out jobs: 1 job(s) waiting." in text


def test_the_overview_reads_no_statement_per_paused_or_unread_queue(admin_client, make_job, make_worker):
    """A paused or unread queue's line says its waiting jobs as the jobs per state count them (one grouped
    count): three of each cost the page no more statements than one of each."""
    from django.test.utils import CaptureQueriesContext

    make_worker("w1", queues=["read"])
    url = reverse("admin:django_ojs_overview_changelist")

    def add_queues(n: int) -> None:
        make_job("available", queue=f"held-{n}")
        make_job("available", queue=f"held-{n}")
        Queue.objects.pause(f"held-{n}")
        make_job("available", queue=f"unread-{n}")

    def statements() -> tuple[int, str]:
        with CaptureQueriesContext(connection) as captured:
            page = admin_client.get(url)
        assert page.status_code == 200
        return len(captured), page.content.decode()

    add_queues(1)
    one_each, _ = statements()
    add_queues(2)
    add_queues(3)
    three_each, text = statements()
    assert three_each == one_each
    assert re.search(r"Queue held-3 paused for \d+ s, not handing out jobs: 2 job\(s\) waiting\.", text)
    assert "1 job(s) waiting on queue unread-3, and no live worker reads it." in text


def test_admin_index_links_the_overview(admin_client, db):
    assert reverse("admin:django_ojs_overview_changelist").encode() in admin_client.get(reverse("admin:index")).content


def test_api_key_secret_is_shown_once_and_never_stored(admin_client, db):
    created = admin_client.post(reverse("admin:django_ojs_apikey_add"), {"name": "billing", "scopes": ["enqueue", "read"]})

    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    secret = created.context["secret"]
    key = ApiKey.objects.get(name="billing")
    assert key.key_hash == hash_key(secret) and key.scopes == ["enqueue", "read"]
    assert secret.encode() in created.content
    listing = admin_client.get(reverse("admin:django_ojs_apikey_changelist"))
    assert secret.encode() not in listing.content
    assert key.prefix.encode() in listing.content and b"never" in listing.content


def test_an_operators_key_reads_and_cancels_and_the_form_says_what_each_scope_allows(admin_client, db):
    add = reverse("admin:django_ojs_apikey_add")
    form = admin_client.get(add)
    assert b'value="cancel"' in form.content and b"cancel: cancel a job or a workflow;" in form.content
    assert b"enqueue: push, activate, signal, workflows;" in form.content
    created = admin_client.post(add, {"name": "operators", "scopes": ["read", "cancel"]})
    assert created.status_code == 200 and ApiKey.objects.get(name="operators").scopes == ["read", "cancel"]


def test_api_key_form_says_what_is_missing(admin_client, db):
    page = admin_client.post(reverse("admin:django_ojs_apikey_add"), {"name": ""})
    assert page.status_code == 200 and b"This field is required." in page.content
    assert not ApiKey.objects.exists()


def test_api_key_lifetime_is_set_in_the_form_and_listed(admin_client, db):
    add = reverse("admin:django_ojs_apikey_add")
    refused = admin_client.post(add, {"name": "billing", "scopes": ["enqueue"], "expires_in": "soon"})
    assert b"is not a duration" in refused.content and not ApiKey.objects.exists()

    admin_client.post(add, {"name": "billing", "scopes": ["enqueue"], "expires_in": "90d"})
    key = ApiKey.objects.get(name="billing")
    assert abs(key.expires_at - (db_now() + dt.timedelta(days=90))) < dt.timedelta(minutes=1)
    ApiKey.objects.issue("forever", ["read"])
    ended, _ = ApiKey.objects.issue("ended", ["read"], expires_in=dt.timedelta(days=1))
    ApiKey.objects.filter(pk=ended.pk).update(expires_at=db_now() - dt.timedelta(hours=2))

    listing = admin_client.get(reverse("admin:django_ojs_apikey_changelist"))
    rows = {row["name"]: row for row in key_rows(listing)}
    assert rows["billing"]["status"] == "active" and rows["billing"]["expires"].startswith("in ")
    assert rows["forever"]["status"] == "active" and rows["forever"]["expires"] == "never"
    assert rows["ended"]["status"].startswith("expired") and rows["ended"]["expires"].endswith("ago")

    def names(status: str) -> set[str]:
        page = admin_client.get(reverse("admin:django_ojs_apikey_changelist"), {"status": status})
        return {row["name"] for row in key_rows(page)}

    assert names("active") == {"billing", "forever"}
    assert names("expired") == {"ended"}


def key_rows(response) -> list[dict[str, str]]:
    """The key list's rows: each cell's text by its column's name."""
    text = response.content.decode()
    rows = []
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", text, re.S)[1:]:
        cells = re.findall(r'<t[hd] class="field-([a-z_]+)[^"]*"[^>]*>(.*?)</t[hd]>', row, re.S)
        rows.append({name: re.sub(r"<[^>]+>|\s+", " ", cell).strip() for name, cell in cells})
    return [row for row in rows if row]


def test_an_admin_key_needs_saying_so_in_the_form(admin_client, db):
    add = reverse("admin:django_ojs_apikey_add")
    page = admin_client.post(add, {"name": "ops", "scopes": ["admin"]})
    assert b"every operation" in page.content and not ApiKey.objects.exists()

    created = admin_client.post(add, {"name": "ops", "scopes": ["admin"], "admin_confirmed": "on"})
    assert created.status_code == 200 and ApiKey.objects.get(name="ops").scopes == ["admin"]


def test_job_counts_do_not_scan_the_table(admin_client, make_job, django_assert_max_num_queries):
    """A list page makes a fixed number of queries, none of them an unbounded COUNT."""
    for _ in range(3):
        make_job("available")
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        admin_client.get(reverse("admin:django_ojs_job_changelist"))
    counts = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    assert counts and all("LIMIT" in sql.upper() for sql in counts)


@pytest.mark.parametrize(("choice", "slots", "title"), [
    ("hour", 60, "per minute, last hour"), ("day", 24, "per hour, last day"), ("month", 30, "per day, last 30 days")])
def test_the_overview_chart_draws_the_history_over_the_last_hour_day_or_month(admin_client, db, choice, slots, title):
    now = db_now()
    history_running_since(minute_floor(now) - dt.timedelta(days=40))
    StatsBucket.objects.create(span="hour", start=hour_floor(now) - dt.timedelta(hours=3), queue="q",
                               transition="completed", count=40)
    failed_at = minute_floor(now) - dt.timedelta(minutes=2)
    StatsBucket.objects.create(span="minute", start=failed_at, queue="q", transition="discarded", count=3)
    if hour_floor(failed_at) < hour_floor(now):
        # In an hour's first two minutes the minute belongs to the hour before, which the
        # reaper has summed already: its hour bucket holds it, as the reaper leaves it.
        StatsBucket.objects.create(span="hour", start=hour_floor(failed_at), queue="q", transition="discarded", count=3)

    page = admin_client.get(reverse("admin:django_ojs_overview_changelist"), {"chart": choice})

    text = page.content.decode()
    assert f"Completed and failed {title}" in text
    assert text.count('<rect class="ojs-hover"') == slots
    completed = 40 if choice in ("day", "month") else 0
    assert f"{completed} completed, 3 failed (discarded)" in text
    assert page.context["chart_note"] == ""


def test_the_overview_says_why_its_chart_is_blank_and_when_maintenance_mode_is_on(admin_client, db):
    page = admin_client.get(reverse("admin:django_ojs_overview_changelist"))
    assert "no reaper has run yet" in page.context["chart_note"]
    history_running_since(minute_floor(db_now()) - dt.timedelta(days=1),
                          counted_through=minute_floor(db_now()) - dt.timedelta(hours=1))
    page = admin_client.get(reverse("admin:django_ojs_overview_changelist"))
    assert "is ojs_reaper running?" in page.context["chart_note"]
    assert "Maintenance mode" not in page.content.decode()
    maintenance_mode.enter("database migration", dt.timedelta(minutes=30))
    text = admin_client.get(reverse("admin:django_ojs_overview_changelist")).content.decode()
    assert "Maintenance mode since" in text and "database migration" in text and "expected to end" in text


def test_past_a_release_the_attempts_say_how_many_were_charged_as_the_log_does(admin_client, make_job):
    # A shutdown released attempt 1 uncharged; attempt 2 runs: "2 / 3" read as two of three spent.
    job = make_job("available")
    [held] = Job.objects.fetch([job.queue], worker_id="w1")
    Job.objects.fail(held.id, Failure(type="ShutdownError", message="the worker shut down"),
                     lease=Lease(worker_id="w1", attempt=held.attempt), requeue=True)
    [again] = Job.objects.fetch([job.queue], worker_id="w2")
    assert (again.attempt, again.releases) == (2, 1)

    listing = admin_client.get(reverse("admin:django_ojs_job_changelist")).content.decode()
    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[job.pk])).content.decode()
    for shown in (listing, page):
        assert "2 (1 / 3 charged)" in shown


@pytest.mark.parametrize("url", [
    "/admin/django_ojs/job/?queue=%00", "/admin/django_ojs/job/?type=a%00", "/admin/django_ojs/job/?q=%00",
    "/admin/django_ojs/deadletterjob/?error_type=%00", "/admin/django_ojs/workflow/?type=%00",
    "/admin/django_ojs/ratelimitoverride/?key=%00", "/admin/django_ojs/worker/%00/change/",
    "/admin/django_ojs/queue/%00/configure/", "/admin/django_ojs/job/1/signal/?x%00=1",
])
def test_a_nul_anywhere_in_a_request_is_refused_not_an_error_page(admin_client, make_job, url):
    """PostgreSQL keeps no NUL in text: a filter, a search or an id holding one is a 400, on every page."""
    make_job("available")
    response = admin_client.get(url)
    assert response.status_code == 400
    assert b"NUL" in response.content


def test_a_nul_in_a_form_is_refused_and_changes_nothing(admin_client, make_job):
    job = make_job("available")
    form = {"action": "cancel_jobs", "_selected_action": [str(job.pk)], "index": 0, "note": "\x00"}
    assert admin_client.post(reverse("admin:django_ojs_job_changelist"), form).status_code == 400
    assert Job.objects.get(pk=job.pk).state == "available"


def test_a_ticked_row_that_is_no_row_of_the_list_is_refused_not_an_error_page(admin_client, make_job):
    """A crafted action names rows by the list's primary key (a job's seq): a job's UUID there is a 400."""
    job = make_job("available")
    form = {"action": "cancel_jobs", "_selected_action": [str(job.id)], "index": 0}
    assert admin_client.post(reverse("admin:django_ojs_job_changelist"), form).status_code == 400
    assert Job.objects.get(pk=job.pk).state == "available"
    form["_selected_action"] = [str(job.pk)]
    assert admin_client.post(reverse("admin:django_ojs_job_changelist"), form).status_code == 302
    assert Job.objects.get(pk=job.pk).state == "cancelled"


def test_each_page_has_one_name_in_the_index_and_on_the_page(admin_client):
    """The index and the navigation name a list as its own page heading does (and the docs): one name per page."""
    index = admin_client.get(reverse("admin:index")).content.decode()
    named = dict(re.findall(r'<th scope="row" id="django_ojs-([a-z]+)">\s*<a href="[^"]+">([^<]+)</a>', index))
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label == "django_ojs" and getattr(model_admin, "list_title", ""):
            heading = admin_client.get(reverse(f"admin:django_ojs_{model._meta.model_name}_changelist"))
            assert f"<h1>{model_admin.list_title}" in heading.content.decode(), model_admin.list_title
            assert named[model._meta.model_name] == model_admin.list_title
