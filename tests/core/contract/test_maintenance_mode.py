"""Maintenance mode (ojs-admin-api §12.1): nothing handed out, timers wait, held jobs stay safe; leaving resumes all.

Run on the three engines: the one-statement FETCH and worker turn must claim
nothing either.
"""

from __future__ import annotations

import datetime as dt

from django_ojs.core import maintenance_mode
from django_ojs.core.types import Lease, Settlement, Verdict
from django_ojs.models import CronJob, Event, Job, MaintenanceMode, Worker
from django_ojs.protocol.cron_jobs import CronSpec, validate_template
from django_ojs.protocol.errors import InMaintenance
from tests.helpers import ago, holding, reload


def test_in_maintenance_fetch_and_the_workers_turn_claim_nothing_and_leaving_resumes_them(push):
    Worker.objects.register("w1")
    for _ in range(3):
        push(options={"queue": "mq"})
    [held] = Job.objects.fetch(["mq"], worker_id="w1")

    maintenance_mode.enter("database migration")
    assert Job.objects.fetch(["mq"], count=5, worker_id="w1") == []
    assert Job.objects.fetch(["mq", "other"], count=5) == []
    verdicts, claimed = Job.objects.settle_and_fetch("w1", [Settlement(held.id, Lease("w1", 1), result=1)], ["mq"], 5)
    # What the worker finished is written; nothing new is handed out.
    assert verdicts == [Verdict.COMPLETED] and claimed == []
    assert reload(held).state == "completed"
    assert Job.objects.filter(queue="mq", state="available").count() == 2

    maintenance_mode.leave()
    assert len(Job.objects.fetch(["mq"], count=5, worker_id="w1")) == 2


def test_in_maintenance_the_jobs_held_keep_their_leases_and_the_reaper_still_guards_them(push, claim):
    lapsed = claim("w1")
    kept = claim("w2")
    Job.objects.filter(pk=lapsed.pk).update(lease_expires_at=ago(seconds=1))
    maintenance_mode.enter()
    reply = Worker.objects.beat("w2", held=holding(kept))
    assert [job.job_id for job in reply.jobs_extended] == [str(kept.id)]
    assert Job.objects.requeue_lapsed(100) == 1 and reload(lapsed).state == "available"


def test_in_maintenance_due_jobs_are_not_promoted_nor_cron_fired_until_it_ends(push):
    due = push(options={"queue": "timed", "delay_until": "2999-01-01T00:00:00Z"})
    Job.objects.filter(pk=due.pk).update(run_at=ago(seconds=1))
    cron, _ = CronJob.objects.register(CronSpec(
        name="nightly", expression="* * * * *", timezone="UTC",
        job_template=validate_template({"type": "report.build", "args": [], "options": {"queue": "cron"}})))
    CronJob.objects.filter(pk=cron.pk).update(next_run_at=ago(minutes=3))

    maintenance_mode.enter("upgrade", dt.timedelta(minutes=30))
    assert Job.objects.promote_due(100) == 0 and CronJob.objects.fire_due(100) == 0
    assert reload(due).state == "scheduled" and not Job.objects.filter(queue="cron").exists()

    maintenance_mode.leave()
    assert Job.objects.promote_due(100) == 1 and reload(due).state == "available"
    # The schedule missed three minutes: it fires once, then waits for its next time.
    assert CronJob.objects.fire_due(100) == 1 and CronJob.objects.fire_due(100) == 0


def test_entering_and_leaving_are_stored_for_every_process_and_recorded_once(db):
    entered = maintenance_mode.enter("migration", dt.timedelta(minutes=30))
    row = MaintenanceMode.objects.get()
    assert row.enabled and row.reason == "migration" and row.estimated_end - row.enabled_at == dt.timedelta(minutes=30)
    again = maintenance_mode.enter("migration, part 2")
    assert again.enabled_at == entered.enabled_at and again.estimated_end is None  # still the same window
    # Another process reads the row, not this one's cache.
    maintenance_mode.forget()
    assert maintenance_mode.current() == again
    assert maintenance_mode.leave() == maintenance_mode.OFF and not MaintenanceMode.objects.get().enabled
    maintenance_mode.leave()
    assert list(Event.objects.filter(type__startswith="maintenance.").order_by("seq").values_list("type", flat=True)) == [
        "maintenance.enabled", "maintenance.disabled"]


def test_the_http_doors_refusal_says_how_long_to_wait(db):
    maintenance_mode.refuse_pushes()  # off: nothing raised
    maintenance_mode.enter("upgrade", dt.timedelta(minutes=10))
    try:
        maintenance_mode.refuse_pushes()
    except InMaintenance as refused:
        assert refused.code == "backend_unavailable" and refused.retryable
        assert 590 <= refused.retry_after <= 600 and "upgrade" in refused.message
    else:
        raise AssertionError("PUSH was not refused in maintenance mode")
    maintenance_mode.enter("no estimate")
    assert maintenance_mode.current().retry_after(ago(seconds=0)) == maintenance_mode.RETRY_AFTER_UNKNOWN
