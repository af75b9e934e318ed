"""Every admin action goes through the core and says "n done, m skipped because …"."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from django_ojs.models import ApiKey, Job, JobError, Queue, Worker
from django_ojs.protocol.states import WorkerState


def run_action(client, model: str, action: str, pks: list, **extra) -> list[str]:
    """POST an admin action as the changelist's form does; return the messages it left."""
    url = reverse(f"admin:django_ojs_{model}_changelist")
    form = {"action": action, "_selected_action": [str(pk) for pk in pks], "index": 0, **extra}
    # Following the redirect shows, and so consumes, the messages.
    response = client.post(url, form, follow=True)
    assert response.status_code == 200, response.content[:500]
    return [str(message) for message in response.context["messages"]]


def states(*jobs: Job) -> list[str]:
    return [Job.objects.get(pk=job.pk).state for job in jobs]


# -- Jobs ------------------------------------------------------------------------------


def test_cancel_cancels_waiting_jobs_and_reports_finished_ones(admin_client, make_job):
    finished = make_job("completed", queue="mail")
    dead = make_job("discarded", queue="mail")
    waiting = make_job("available", queue="mail")
    scheduled = make_job("scheduled")

    said = run_action(admin_client, "job", "cancel_jobs", [finished.pk, dead.pk, waiting.pk, scheduled.pk])

    # Rows are taken newest first, so the reasons come in that order.
    assert said == [
        "Cancel: 2 done, 2 skipped because: discarded (1), completed (1). "
        "Only available, active, scheduled, retryable or pending jobs can be cancelled."
    ]
    assert states(finished, dead, waiting, scheduled) == ["completed", "discarded", "cancelled", "cancelled"]


def test_cancel_of_only_valid_rows_is_a_plain_success(admin_client, make_job):
    active = make_job("active")
    assert run_action(admin_client, "job", "cancel_jobs", [active.pk]) == ["Cancel: 1 done."]
    assert states(active) == ["cancelled"]


def test_activate_moves_pending_jobs_only(admin_client, make_job):
    pending = make_job("pending")
    available = make_job("available")

    said = run_action(admin_client, "job", "activate_jobs", [pending.pk, available.pk])

    assert said == [
        "Activate: 1 done, 1 skipped because: available (1). Only pending jobs can be activated."
    ]
    assert states(pending, available) == ["available", "available"]


def test_retry_from_jobs_page_resurrects_discarded_jobs_with_their_history(admin_client, make_job):
    dead = make_job("discarded", failures=2)
    completed = make_job("completed", queue="other")

    said = run_action(admin_client, "job", "retry_jobs", [dead.pk, completed.pk])

    assert said == [
        "Retry: 1 done, 1 skipped because: completed (1). Only discarded jobs can be retried."
    ]
    dead.refresh_from_db()
    assert (dead.state, dead.attempt, dead.error) == ("available", 0, None)
    assert JobError.objects.filter(job_id=dead.pk).count() == 2


def test_discard_gives_up_on_waiting_jobs_but_not_running_ones(admin_client, make_job):
    active = make_job("active")
    waiting = make_job("available")
    retrying = make_job("retryable", queue="other")

    said = run_action(admin_client, "job", "discard_jobs", [active.pk, waiting.pk, retrying.pk])

    assert said == [
        "Discard: 2 done, 1 skipped because: active (1). "
        "Only available, scheduled, retryable or pending jobs can be discarded."
    ]
    assert states(active, waiting, retrying) == ["active", "discarded", "discarded"]


def test_a_job_deleted_since_the_page_loaded_is_reported(admin_client, make_job):
    kept = make_job("available")
    gone = make_job("discarded", queue="other")
    gone_pk = gone.pk
    Job.objects.purge_dead(gone.id)

    said = run_action(admin_client, "job", "cancel_jobs", [kept.pk, gone_pk])

    assert said == ["Cancel: 1 done, 1 skipped because: no longer exists (1)."]


def test_actions_stop_at_the_limit_and_say_so(admin_client, make_job, monkeypatch):
    from django_ojs.admin import job_moves, outcome

    monkeypatch.setattr(job_moves, "ACTION_LIMIT", 2)
    monkeypatch.setattr(outcome, "ACTION_LIMIT", 2)
    jobs = [make_job("available") for _ in range(3)]

    said = run_action(admin_client, "job", "cancel_jobs", [job.pk for job in jobs])

    assert said == [
        "Cancel: 2 done. Only the first 2 selected rows were processed; run the action again for the rest."
    ]
    assert sorted(states(*jobs)) == ["available", "cancelled", "cancelled"]


def test_job_actions_are_recorded_in_the_admin_log(admin_client, make_job):
    from django.contrib.admin.models import LogEntry

    job = make_job("available")
    run_action(admin_client, "job", "cancel_jobs", [job.pk])
    entry = LogEntry.objects.get()
    assert (entry.object_id, entry.change_message) == (str(job.pk), "Cancel (admin action)")


def test_buttons_on_a_job_page_run_the_same_moves(admin_client, make_job):
    job = make_job("pending")
    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[job.pk]))
    assert b">Activate</button>" in page.content and b">Cancel</button>" in page.content
    assert b">Retry</button>" not in page.content

    response = admin_client.post(reverse("admin:django_ojs_job_move", args=[job.pk, "activate_jobs"]))

    assert response.status_code == 302
    assert response["Location"] == reverse("admin:django_ojs_job_change", args=[job.pk])
    assert states(job) == ["available"]
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["Activate: 1 done."]


def test_a_button_for_a_move_no_longer_valid_reports_instead_of_failing(admin_client, make_job):
    job = make_job("available")
    Job.objects.cancel(job.id)

    response = admin_client.post(reverse("admin:django_ojs_job_move", args=[job.pk, "discard_jobs"]), follow=True)

    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == [
        "Discard: 0 done, 1 skipped because: cancelled (1). "
        "Only available, scheduled, retryable or pending jobs can be discarded."
    ]


def test_a_button_only_answers_post(admin_client, make_job):
    job = make_job("pending")
    assert admin_client.get(reverse("admin:django_ojs_job_move", args=[job.pk, "activate_jobs"])).status_code == 405
    assert admin_client.post(reverse("admin:django_ojs_job_move", args=[job.pk, "no_such_move"])).status_code == 404


# -- Dead letter ---------------------------------------------------------------------


def test_dead_letter_retry_reports_jobs_that_left_it_meanwhile(admin_client, make_job):
    dead = make_job("discarded")
    already_retried = make_job("discarded", queue="other")
    Job.objects.resurrect(already_retried.id)

    said = run_action(admin_client, "deadletterjob", "retry_jobs", [dead.pk, already_retried.pk])

    assert said == ["Retry: 1 done, 1 skipped because: no longer discarded (1)."]
    assert states(dead) == ["available"]


def test_purge_asks_first_and_deletes_nothing_until_confirmed(admin_client, make_job):
    dead = make_job("discarded", failures=2)
    url = reverse("admin:django_ojs_deadletterjob_changelist")
    form = {"action": "purge_jobs", "_selected_action": [str(dead.pk)], "index": 0}

    asked = admin_client.post(url, form)

    assert asked.status_code == 200
    assert b"are you sure?" in asked.content and b"cannot be undone" in asked.content
    assert Job.objects.filter(pk=dead.pk).exists()

    confirmed = admin_client.post(url, {**form, "confirmed": "purge_jobs"})

    assert [str(m) for m in get_messages(confirmed.wsgi_request)] == ["Purge: 1 done."]
    assert not Job.objects.filter(pk=dead.pk).exists()
    assert not JobError.objects.filter(job_id=dead.pk).exists()


def test_purge_confirmation_reports_jobs_retried_in_between(admin_client, make_job):
    dead = make_job("discarded")
    retried = make_job("discarded", queue="other")
    Job.objects.resurrect(retried.id)

    said = run_action(admin_client, "deadletterjob", "purge_jobs", [dead.pk, retried.pk], confirmed="purge_jobs")

    assert said == ["Purge: 1 done, 1 skipped because: no longer discarded (1)."]
    assert states(retried) == ["available"]


def test_purge_button_on_a_dead_job_page_asks_then_returns_to_the_list(admin_client, make_job):
    dead = make_job("discarded")
    url = reverse("admin:django_ojs_deadletterjob_move", args=[dead.pk, "purge_jobs"])

    asked = admin_client.post(url)
    assert asked.status_code == 200 and b"Yes, purge" in asked.content

    done = admin_client.post(url, {"confirmed": "purge_jobs"})
    assert done["Location"] == reverse("admin:django_ojs_deadletterjob_changelist")
    assert not Job.objects.filter(pk=dead.pk).exists()


# -- Workers ---------------------------------------------------------------------------


def test_quiet_sets_the_directive_and_skips_dead_and_already_quiet_workers(admin_client, make_worker):
    running = make_worker("w-running")
    quiet = make_worker("w-quiet")
    Worker.objects.set_directive([quiet.pk], WorkerState.QUIET)
    dead = make_worker("w-dead")
    Worker.objects.filter(pk=dead.pk).update(last_heartbeat_at=dead.last_heartbeat_at - dt.timedelta(minutes=5))

    said = run_action(admin_client, "worker", "quiet_workers", [running.pk, quiet.pk, dead.pk])

    assert sorted(said[0].split(" because: ")[1].rstrip(".").split(", ")) == [
        "already asked to quiet (1)", "dead (no heartbeat) (1)",
    ]
    assert said[0].startswith("Quiet: 1 done, 2 skipped")
    assert Worker.objects.get(pk=running.pk).directive == WorkerState.QUIET


def test_resume_skips_terminating_workers(admin_client, make_worker):
    quiet = make_worker("w-quiet")
    terminating = make_worker("w-term")
    Worker.objects.set_directive([quiet.pk], WorkerState.QUIET)
    Worker.objects.set_directive([terminating.pk], WorkerState.TERMINATE)

    said = run_action(admin_client, "worker", "resume_workers", [quiet.pk, terminating.pk])

    assert said == ["Resume: 1 done, 1 skipped because: terminating (1)."]
    assert Worker.objects.get(pk=quiet.pk).directive == WorkerState.RUNNING


def test_terminate_reports_a_worker_that_deregistered_meanwhile(admin_client, make_worker):
    staying = make_worker("w-1")
    leaving = make_worker("w-2")
    Worker.objects.deregister(leaving.pk)

    said = run_action(admin_client, "worker", "terminate_workers", [staying.pk, leaving.pk])

    assert said == ["Terminate: 1 done, 1 skipped because: no longer registered (1)."]
    assert Worker.objects.get(pk=staying.pk).directive == WorkerState.TERMINATE


# -- Queues and API keys ------------------------------------------------------------------


def test_pause_and_resume_queues_through_the_core(admin_client, make_job):
    make_job("available", queue="mail")
    make_job("available", queue="billing")
    Queue.objects.pause("billing")

    said = run_action(admin_client, "queue", "pause_queues", ["mail", "billing"])

    assert said == ["Pause: 1 done, 1 skipped because: already paused (1)."]
    assert Queue.objects.get(pk="mail").paused
    assert Job.objects.fetch(["mail"]) == []

    said = run_action(admin_client, "queue", "resume_queues", ["mail", "billing", "default"])

    assert said == ["Resume: 2 done, 1 skipped because: no longer exists (1)."]
    assert not Queue.objects.filter(paused=True).exists()


def test_revoke_keys_once(admin_client, db):
    active, _ = ApiKey.objects.issue("billing", ["enqueue"])
    revoked, _ = ApiKey.objects.issue("old", ["read"])
    ApiKey.objects.revoke([revoked.pk])

    said = run_action(admin_client, "apikey", "revoke_keys", [active.pk, revoked.pk])

    assert said == ["Revoke: 1 done, 1 skipped because: already revoked (1)."]
    assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 0


@pytest.mark.parametrize("model", ["job", "deadletterjob", "worker", "queue", "apikey"])
def test_no_page_offers_delete(admin_client, model, db):
    page = admin_client.get(reverse(f"admin:django_ojs_{model}_changelist"))
    assert b'value="delete_selected"' not in page.content
