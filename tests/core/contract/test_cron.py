"""CronJob.objects.fire_due: each due occurrence fires once (ojs-cron §6-8)."""

from __future__ import annotations

import datetime as dt
import logging
from zoneinfo import ZoneInfo

import pytest

from django_ojs.core.clock import db_now
from django_ojs.models import CronJob, Event, Job
from django_ojs.protocol.cron_jobs import CronSpec, validate_template
from django_ojs.protocol.errors import NotFound
from tests.helpers import ago


@pytest.fixture
def register(db):
    def make(name="nightly", expression="* * * * *", **fields):
        template = fields.pop("job_template", {"type": "report.build", "args": [1], "options": {"queue": "cron"}})
        cron, _ = CronJob.objects.register(
            CronSpec(name=name, expression=expression, timezone=fields.pop("timezone", "UTC"),
                     job_template=validate_template(template), **fields))
        return cron

    return make


def make_due(cron, **delta):
    CronJob.objects.filter(pk=cron.pk).update(next_run_at=ago(**(delta or {"seconds": 1})))
    return CronJob.objects.get(pk=cron.pk)


def test_registration_schedules_the_next_occurrence_and_nothing_fires_before_it(register):
    cron = register(expression="*/5 * * * *")
    now = db_now()
    assert now < cron.next_run_at <= now + dt.timedelta(minutes=5)
    assert cron.next_run_at.minute % 5 == 0 and cron.next_run_at.second == 0
    assert CronJob.objects.fire_due(10) == 0
    assert not Job.objects.exists()


def test_a_due_schedule_fires_one_job_and_advances(register):
    cron = make_due(register())
    occurrence = cron.next_run_at
    assert CronJob.objects.fire_due(10) == 1
    job = Job.objects.get()
    assert (job.type, job.args, job.queue, job.state, job.cron_name) == (
        "report.build", [1], "cron", "available", "nightly")
    assert job.meta["cron_name"] == "nightly"
    cron.refresh_from_db()
    assert (cron.last_run_at, cron.run_count, cron.last_job_id) == (occurrence, 1, job.id)
    assert cron.next_run_at > db_now()
    assert CronJob.objects.fire_due(10) == 0
    assert Event.objects.filter(type="cron.triggered").count() == 1


def test_a_schedule_that_missed_many_occurrences_fires_once(register):
    make_due(register(), hours=3)
    assert CronJob.objects.fire_due(10) == 1
    assert CronJob.objects.fire_due(10) == 0
    assert Job.objects.count() == 1


def test_skip_does_not_fire_while_the_previous_job_is_unfinished(register):
    cron = make_due(register(overlap_policy="skip"))
    CronJob.objects.fire_due(10)
    first = Job.objects.get()
    Job.objects.fetch(["cron"])
    make_due(cron)
    assert CronJob.objects.fire_due(10) == 0
    assert Job.objects.count() == 1
    assert Event.objects.filter(type="cron.skipped").count() == 1
    cron.refresh_from_db()
    assert cron.next_run_at > db_now()
    Job.objects.ack(first.id)
    make_due(cron)
    assert CronJob.objects.fire_due(10) == 1
    assert Job.objects.count() == 2


def test_allow_fires_beside_the_unfinished_previous_job(register):
    cron = make_due(register(overlap_policy="allow"))
    CronJob.objects.fire_due(10)
    make_due(cron)
    assert CronJob.objects.fire_due(10) == 1
    assert list(Job.objects.values_list("state", flat=True)) == ["available", "available"]


def test_cancel_previous_cancels_the_unfinished_job_and_fires(register):
    cron = make_due(register(overlap_policy="cancel_previous"))
    CronJob.objects.fire_due(10)
    first = Job.objects.get()
    make_due(cron)
    assert CronJob.objects.fire_due(10) == 1
    assert Job.objects.get(pk=first.pk).state == "cancelled"
    assert Job.objects.exclude(pk=first.pk).get().state == "available"


def test_occurrences_follow_the_wall_clock_of_the_schedules_timezone(register):
    zone = ZoneInfo("America/New_York")
    cron = register(expression="30 9 * * *", timezone="America/New_York")
    local = cron.next_run_at.astimezone(zone)
    assert (local.hour, local.minute) == (9, 30)
    assert cron.next_run_at - db_now() <= dt.timedelta(days=1)
    CronJob.objects.filter(pk=cron.pk).update(next_run_at=ago(seconds=1))
    CronJob.objects.fire_due(10)
    cron.refresh_from_db()
    assert (cron.next_run_at.astimezone(zone).hour, cron.next_run_at.astimezone(zone).minute) == (9, 30)


def test_a_disabled_schedule_never_fires(register):
    cron = register(enabled=False)
    assert cron.next_run_at is None
    make_due(cron)
    CronJob.objects.filter(pk=cron.pk).update(enabled=False)
    assert CronJob.objects.fire_due(10) == 0


def test_a_template_that_no_longer_validates_does_not_stop_other_schedules(register, caplog):
    broken = make_due(register(name="broken"))
    CronJob.objects.filter(pk=broken.pk).update(job_template={"type": "Not A Type", "args": []})
    make_due(register(name="healthy"))
    with caplog.at_level(logging.ERROR, logger="django_ojs.cron"):
        assert CronJob.objects.fire_due(10) == 1
    assert "broken" in caplog.text
    assert list(Job.objects.values_list("cron_name", flat=True)) == ["healthy"]
    broken.refresh_from_db()
    assert broken.next_run_at > db_now()


def test_fired_jobs_get_the_projects_defaults_like_pushed_ones(register, ojs):
    ojs(DEFAULT_RETRY={"max_attempts": 7}, DEFAULT_QUEUE="main")
    make_due(register(job_template={"type": "a", "args": []}))
    CronJob.objects.fire_due(10)
    job = Job.objects.get()
    assert (job.queue, job.max_attempts) == ("main", 7)


def test_registering_again_updates_the_schedule(register):
    register(expression="0 0 1 1 *")
    cron, created = CronJob.objects.register(CronSpec(
        name="nightly", expression="* * * * *", timezone="UTC", job_template={"type": "a", "args": []}))
    assert created is False
    assert cron.next_run_at - db_now() <= dt.timedelta(minutes=1)
    assert CronJob.objects.count() == 1


def test_unregister_removes_the_schedule(register):
    register()
    assert CronJob.objects.unregister("nightly").name == "nightly"
    assert not CronJob.objects.exists()
    with pytest.raises(NotFound):
        CronJob.objects.unregister("nightly")
