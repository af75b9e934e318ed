"""Admin actions on everything the filter matches ("Select all N"), in batches through the core."""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from django_ojs.admin import bulk_actions as filter_wide
from django_ojs.models import Job
from tests.job_rows import insert_jobs

LARGE = 100_000


def post_filter_wide(client, model: str, action: str, query: str, *, confirmed: bool, pks=(1,)):
    """The changelist form with "Select all" ticked, as the browser posts it, optionally confirmed.

    Django wants some ticked rows besides "select all" (the page's, in a browser); which does not matter.
    """
    url = reverse(f"admin:django_ojs_{model}_changelist") + query
    form = {"action": action, "_selected_action": [str(pk) for pk in pks], "index": 0, "select_across": 1}
    if confirmed:
        form["confirmed"] = f"all:{action}"
    return client.post(url, form, follow=True)


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_a_filter_wide_retry_asks_first_with_the_count_and_moves_nothing(admin_client, db):
    insert_jobs(30, queue="big")
    insert_jobs(5, queue="small")
    page = post_filter_wide(admin_client, "deadletterjob", "retry_jobs", "?queue=big", confirmed=False)
    assert page.status_code == 200
    assert page.templates[0].name == "admin/django_ojs/confirm_filter_wide.html"
    body = page.content.decode()
    assert '<span class="ojs-movable-count">30</span>' in body and "<code>queue=big</code>" in body
    assert Job.objects.filter(state="discarded").count() == 35


def test_a_confirmed_filter_wide_retry_moves_every_match_past_the_action_limit(admin_client, db):
    insert_jobs(2_500, queue="big")
    insert_jobs(5, queue="small")
    done = post_filter_wide(admin_client, "deadletterjob", "retry_jobs", "?queue=big", confirmed=True)
    assert messages_of(done) == ["Retry, everything matching the filter: 2,500 done in 3 batches."]
    assert Job.objects.filter(queue="big", state="available").count() == 2_500
    assert Job.objects.filter(queue="small", state="discarded").count() == 5
    entry = LogEntry.objects.get()
    assert entry.object_repr == "2500 jobs matching queue=big" and entry.object_id is None


def test_a_filter_wide_cancel_follows_the_search_and_reports_skips(admin_client, db, push):
    wanted = [push(type="mail", args=[{"tenant": "t1"}]) for _ in range(3)]
    other = push(type="mail", args=[{"tenant": "t2"}])
    done = post_filter_wide(admin_client, "job", "cancel_jobs", "?q=args.tenant%3Dt1", confirmed=True)
    assert messages_of(done) == ["Cancel, everything matching the filter: 3 done in 1 batches."]
    assert {Job.objects.get(pk=j.pk).state for j in wanted} == {"cancelled"}
    assert Job.objects.get(pk=other.pk).state == "available"


def test_a_filter_wide_purge_warns_then_deletes_for_good(admin_client, db):
    insert_jobs(12, queue="gone")
    page = post_filter_wide(admin_client, "deadletterjob", "purge_jobs", "?queue=gone", confirmed=False)
    assert "deleted for good" in page.content.decode() and Job.objects.count() == 12
    post_filter_wide(admin_client, "deadletterjob", "purge_jobs", "?queue=gone", confirmed=True)
    assert Job.objects.count() == 0


@pytest.mark.postgres
def test_a_filter_wide_retry_of_100_000_dead_jobs_moves_every_one(admin_client, db):
    insert_jobs(LARGE, queue="flood", analyze=True)
    insert_jobs(1_000, queue="calm")
    started = time.monotonic()
    page = post_filter_wide(admin_client, "deadletterjob", "retry_jobs", "?queue=flood", confirmed=False)
    asked = time.monotonic() - started
    # Past 10,000 the count is the planner's estimate: the page must not count 100,000 rows.
    assert page.status_code == 200 and "ojs-movable-count" in page.content.decode()
    # Each run answers within its time budget; on a loaded machine the
    # operator may have to run it again, and the message says so.
    moved, runs, started = 0, 0, time.monotonic()
    while True:
        done = post_filter_wide(admin_client, "deadletterjob", "retry_jobs", "?queue=flood", confirmed=True)
        assert done.status_code == 200
        [said] = messages_of(done)
        runs += 1
        moved += int(re.search(r"filter: ([\d,]+) done", said)[1].replace(",", ""))
        if "More jobs match" not in said:
            break
        assert runs < 10, said
    moved_in = time.monotonic() - started
    assert moved == LARGE and ", 0 skipped" not in said and "skipped" not in said
    assert Job.objects.filter(queue="flood", state="available").count() == LARGE
    assert Job.objects.filter(queue="calm", state="discarded").count() == 1_000
    # And the list answers afterwards.
    assert admin_client.get(reverse("admin:django_ojs_job_changelist") + "?queue=flood").status_code == 200
    print(
        f"\nfilter-wide retry of {LARGE:,} dead jobs: confirmation page {asked:.2f} s, "
        f"moved in {moved_in:.1f} s over {runs} run(s) of at most {filter_wide.TIME_BUDGET_SECONDS} s"
    )
