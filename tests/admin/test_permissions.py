"""View permission sees everything and can do nothing; actions need the model's change permission."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from django_ojs.models import ApiKey, Job, Queue, Worker
from django_ojs.protocol.states import WorkerState

from .conftest import VIEW_ONLY, staff_with

PAGES = ["job", "deadletterjob", "worker", "queue", "apikey"]


@pytest.fixture
def everything(make_job, make_worker):
    """One of each thing a page lists."""
    return {
        "available": make_job("available"),
        "dead": make_job("discarded", queue="mail"),
        "pending": make_job("pending"),
        "worker": make_worker(),
        "key": ApiKey.objects.issue("billing", ["enqueue"])[0],
    }


@pytest.mark.parametrize("model", PAGES)
def test_view_only_staff_sees_every_list_without_actions(viewer_client, everything, model):
    page = viewer_client.get(reverse(f"admin:django_ojs_{model}_changelist"))
    assert page.status_code == 200
    assert b'name="action"' not in page.content
    assert b'name="_selected_action"' not in page.content


def test_view_only_staff_sees_the_overview_and_the_live_workers(viewer_client, everything):
    assert viewer_client.get(reverse("admin:django_ojs_overview_changelist")).status_code == 200
    live = viewer_client.get(reverse("admin:django_ojs_worker_live"))
    assert live.status_code == 200 and "worker-1" in live.json()["rows"]


def test_the_live_workers_refuse_a_query_that_is_no_filter_of_theirs(viewer_client, everything):
    live = viewer_client.get(reverse("admin:django_ojs_worker_live"), {"chart": "day"})
    assert live.status_code == 400
    assert "error" in live.json()


def test_view_only_staff_sees_a_job_page_without_buttons(viewer_client, everything):
    page = viewer_client.get(reverse("admin:django_ojs_job_change", args=[everything["pending"].pk]))
    assert page.status_code == 200
    assert b"Error history" in page.content
    assert b"ojs-move" not in page.content
    assert b'name="_save"' not in page.content


def test_view_only_staff_cannot_run_an_action_by_posting_it(viewer_client, everything):
    pending = everything["pending"]
    url = reverse("admin:django_ojs_job_changelist")
    viewer_client.post(url, {"action": "activate_jobs", "_selected_action": [str(pending.pk)], "index": 0})
    assert Job.objects.get(pk=pending.pk).state == "pending"

    dead = everything["dead"]
    url = reverse("admin:django_ojs_deadletterjob_changelist")
    viewer_client.post(url, {"action": "purge_jobs", "_selected_action": [str(dead.pk)], "index": 0, "confirmed": "purge_jobs"})
    assert Job.objects.filter(pk=dead.pk).exists()

    url = reverse("admin:django_ojs_worker_changelist")
    viewer_client.post(url, {"action": "quiet_workers", "_selected_action": ["worker-1"], "index": 0})
    assert Worker.objects.get(pk="worker-1").directive == WorkerState.RUNNING

    url = reverse("admin:django_ojs_queue_changelist")
    viewer_client.post(url, {"action": "pause_queues", "_selected_action": ["default"], "index": 0})
    assert not Queue.objects.get(pk="default").paused

    key = everything["key"]
    url = reverse("admin:django_ojs_apikey_changelist")
    viewer_client.post(url, {"action": "revoke_keys", "_selected_action": [str(key.pk)], "index": 0})
    assert ApiKey.objects.get(pk=key.pk).revoked_at is None


def test_view_only_staff_is_refused_the_buttons_and_forms(viewer_client, everything):
    pending = everything["pending"]
    move = viewer_client.post(reverse("admin:django_ojs_job_move", args=[pending.pk, "activate_jobs"]))
    assert move.status_code == 403
    assert Job.objects.get(pk=pending.pk).state == "pending"

    edit = viewer_client.post(reverse("admin:django_ojs_job_change", args=[pending.pk]), {"state": "available"})
    assert edit.status_code == 403

    assert viewer_client.get(reverse("admin:django_ojs_apikey_add")).status_code == 403
    assert viewer_client.post(reverse("admin:django_ojs_apikey_add"), {"name": "x", "scopes": ["admin"]}).status_code == 403
    assert not ApiKey.objects.filter(name="x").exists()


def test_job_pages_are_read_only_even_for_superusers(admin_client, make_job):
    job = make_job("pending")
    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[job.pk]))
    assert b"Save" not in page.content
    refused = admin_client.post(reverse("admin:django_ojs_job_change", args=[job.pk]), {"state": "completed"})
    assert refused.status_code == 403
    assert Job.objects.get(pk=job.pk).state == "pending"


def test_actions_need_the_change_permission_of_their_own_model(client, make_job):
    """Changing jobs does not grant the dead letter's retry and purge, a separate entry."""
    client.force_login(staff_with([*VIEW_ONLY, "change_job"]))
    dead = make_job("discarded")

    jobs_page = client.get(reverse("admin:django_ojs_job_changelist"))
    assert b'value="cancel_jobs"' in jobs_page.content
    dead_letter_page = client.get(reverse("admin:django_ojs_deadletterjob_changelist"))
    assert b'value="purge_jobs"' not in dead_letter_page.content

    refused = client.post(reverse("admin:django_ojs_deadletterjob_move", args=[dead.pk, "purge_jobs"]), {"confirmed": "purge_jobs"})
    assert refused.status_code == 403
    assert Job.objects.filter(pk=dead.pk).exists()


def test_purging_needs_the_delete_permission_of_the_failed_jobs(client, make_job):
    """Purge deletes jobs for good: an operator who may change failed jobs but not delete them retries only."""
    client.force_login(staff_with([*VIEW_ONLY, "change_deadletterjob"]))
    dead = make_job("discarded")
    changelist = reverse("admin:django_ojs_deadletterjob_changelist")

    page = client.get(changelist)
    assert b'value="retry_jobs"' in page.content
    assert b'value="purge_jobs"' not in page.content
    job_page = client.get(reverse("admin:django_ojs_deadletterjob_change", args=[dead.pk]))
    assert b"/move/retry_jobs/" in job_page.content
    assert b"/move/purge_jobs/" not in job_page.content

    client.post(changelist, {"action": "purge_jobs", "_selected_action": [str(dead.pk)], "index": 0,
                             "confirmed": "purge_jobs"})
    client.post(changelist, {"action": "purge_jobs", "select_across": "1", "index": 0, "confirmed": "purge_jobs"})
    button = client.post(reverse("admin:django_ojs_deadletterjob_move", args=[dead.pk, "purge_jobs"]),
                         {"confirmed": "purge_jobs"})
    assert button.status_code == 404
    assert Job.objects.filter(pk=dead.pk).exists()

    client.force_login(staff_with([*VIEW_ONLY, "change_deadletterjob", "delete_deadletterjob"], "purger"))
    assert b'value="purge_jobs"' in client.get(changelist).content
    client.post(changelist, {"action": "purge_jobs", "_selected_action": [str(dead.pk)], "index": 0,
                             "confirmed": "purge_jobs"})
    assert not Job.objects.filter(pk=dead.pk).exists()


def test_staff_without_any_permission_sees_nothing(client, everything):
    client.force_login(staff_with([], "nobody"))
    for model in [*PAGES, "overview"]:
        assert client.get(reverse(f"admin:django_ojs_{model}_changelist")).status_code == 403
    assert client.get(reverse("admin:django_ojs_worker_live")).status_code == 403


def test_staff_without_the_view_permission_reads_no_progress_and_no_queue_configuration(client, everything):
    """The pages' JSON and forms guard what they show as the pages do: being staff is not enough."""
    job = everything["available"]
    client.force_login(staff_with([p for p in VIEW_ONLY if p not in ("view_job", "view_queue")], "nobody"))

    progress = client.get(reverse("admin:django_ojs_job_progress", args=[job.pk]))
    assert progress.status_code == 403
    assert b"ojs-progress" not in progress.content
    configure = client.get(reverse("admin:django_ojs_queue_configure", args=["default"]))
    assert configure.status_code == 403
    assert b"concurrency" not in configure.content

    client.force_login(staff_with(["view_job", "view_queue"], "reader"))
    assert client.get(reverse("admin:django_ojs_job_progress", args=[job.pk])).status_code == 200
    assert client.get(reverse("admin:django_ojs_queue_configure", args=["default"])).status_code == 200


def test_anonymous_visitors_are_sent_to_the_login_page(client, db):
    response = client.get(reverse("admin:django_ojs_overview_changelist"))
    assert response.status_code == 302 and reverse("admin:login") in response["Location"]


def test_actions_and_buttons_need_the_csrf_token(admin_user, make_job):
    job = make_job("pending")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(admin_user)
    changelist = reverse("admin:django_ojs_job_changelist")
    form = {"action": "activate_jobs", "_selected_action": [str(job.pk)], "index": 0}

    assert browser.post(changelist, form).status_code == 403
    assert browser.post(reverse("admin:django_ojs_job_move", args=[job.pk, "activate_jobs"])).status_code == 403
    assert Job.objects.get(pk=job.pk).state == "pending"

    page = browser.get(changelist)
    token = page.context["csrf_token"]
    assert browser.post(changelist, {**form, "csrfmiddlewaretoken": str(token)}).status_code == 302
    assert Job.objects.get(pk=job.pk).state == "available"
