"""Periodic jobs declared in code: @job(cron=...), OJS["CRON"], synced at reaper start."""

from __future__ import annotations

import json
import signal

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

import django_ojs
from django_ojs.handlers.registry import declared_schedules as declared
from django_ojs.handlers.registry import registry
from django_ojs.models import CronJob, Job
from django_ojs.protocol.cron_jobs import CronSpec, schedule_from_setting, validate_template
from tests.conftest import MEDIA_TYPE
from tests.helpers import ago
from tests.waiting import PATIENCE, wait_until


def nightly(**changes) -> dict:
    return {"name": "reports.nightly", "cron": "0 3 * * *", "timezone": "Europe/Paris", "type": "report.build",
            "args": ["nightly"], "options": {"queue": "reports"}, **changes}


def http_schedule(name: str) -> CronJob:
    cron, _ = CronJob.objects.register(CronSpec(
        name=name, expression="*/5 * * * *", timezone="UTC",
        job_template=validate_template({"type": "ops.ping", "args": []})))
    return cron


@pytest.fixture
def hourly_handler():
    @django_ojs.job("report.hourly_digest", queue="reports", retry={"max_attempts": 2},
                    cron="0 * * * *", timezone="America/New_York", cron_args=["digest"])
    def handler(ctx, kind):
        return kind

    yield handler
    registry.unregister("report.hourly_digest")


def test_the_decorator_declares_a_schedule_with_the_handlers_options(hourly_handler):
    [spec] = [spec for spec in registry.schedules() if spec.name == "report.hourly-digest"]
    assert (spec.expression, spec.timezone) == ("0 * * * *", "America/New_York")
    assert spec.job_template["type"] == "report.hourly_digest" and spec.job_template["args"] == ["digest"]
    assert spec.job_template["options"]["queue"] == "reports"
    assert spec.job_template["options"]["retry"] == {"max_attempts": 2}
    # cron= and friends are the schedule's, not enqueue defaults.
    assert "cron" not in registry.defaults("report.hourly_digest")


def test_an_invalid_schedule_in_a_decorator_fails_at_import():
    with pytest.raises(ImproperlyConfigured, match=r"schedule of handler 'report\.broken'"):
        django_ojs.job("report.broken", cron="61 * * * *")(lambda ctx: None)
    with pytest.raises(ImproperlyConfigured, match="need cron="):
        django_ojs.job("report.broken", timezone="UTC")
    assert registry.get("report.broken") is None


@pytest.mark.parametrize("entry", [
    "0 3 * * *", nightly(cron="not a cron"), nightly(timezone="Mars/Olympus"), nightly(type="Bad Type"),
    nightly(name="Has Spaces"),
])
def test_check_rejects_an_invalid_cron_setting(settings, entry):
    settings.OJS = {"CRON": [entry]}
    errors = [m for m in checks.run_checks() if m.id == "django_ojs.E002"]
    assert errors and "OJS['CRON']" in errors[0].msg


def test_check_rejects_two_schedules_of_one_name(settings):
    settings.OJS = {"CRON": [nightly(), nightly(cron="0 4 * * *")]}
    assert any("repeats the name" in m.msg for m in checks.run_checks() if m.id == "django_ojs.E002")


@pytest.mark.django_db
def test_sync_adds_changes_and_removes_only_what_came_from_code(settings):
    http_schedule("ops.ping")
    settings.OJS = {"CRON": [nightly(), nightly(name="reports.weekly", cron="0 5 * * 1")]}
    first = CronJob.objects.sync_from_code(declared())
    assert first == {"added": ["reports.nightly", "reports.weekly"], "changed": [], "removed": [], "unchanged": []}
    nightly_row = CronJob.objects.get(name="reports.nightly")
    assert nightly_row.from_code and nightly_row.job_template["options"] == {"queue": "reports"}

    # A restart with nothing changed keeps the planned next run.
    CronJob.objects.filter(name="reports.nightly").update(next_run_at=ago(seconds=-3600))
    planned = CronJob.objects.get(name="reports.nightly").next_run_at
    assert CronJob.objects.sync_from_code(declared())["unchanged"] == ["reports.nightly", "reports.weekly"]
    assert CronJob.objects.get(name="reports.nightly").next_run_at == planned

    # Changed in code, one removed from code: the HTTP schedule is untouched.
    settings.OJS = {"CRON": [nightly(cron="30 2 * * *")]}
    second = CronJob.objects.sync_from_code(declared())
    assert second == {"added": [], "changed": ["reports.nightly"], "removed": ["reports.weekly"], "unchanged": []}
    assert CronJob.objects.get(name="reports.nightly").expression == "30 2 * * *"
    assert set(CronJob.objects.values_list("name", flat=True)) == {"reports.nightly", "ops.ping"}
    assert not CronJob.objects.get(name="ops.ping").from_code

    settings.OJS = {"CRON": []}
    assert CronJob.objects.sync_from_code(declared())["removed"] == ["reports.nightly"]
    assert list(CronJob.objects.values_list("name", flat=True)) == ["ops.ping"]


@pytest.mark.django_db
def test_a_code_schedule_takes_over_an_http_one_of_its_name(settings, caplog):
    http_schedule("reports.nightly")
    settings.OJS = {"CRON": [nightly()]}
    assert CronJob.objects.sync_from_code(declared())["changed"] == ["reports.nightly"]
    row = CronJob.objects.get(name="reports.nightly")
    assert row.from_code and row.expression == "0 3 * * *"
    assert "registered over HTTP" in caplog.text


@pytest.mark.django_db
def test_a_code_schedule_is_changed_in_code_only_not_over_http(settings, api):
    """Changed or deleted over HTTP, it came back at the next reaper start: the change was lost, though
    answered as done. Now refused, 409, and the row is as the code left it."""
    settings.OJS = {"CRON": [nightly()]}
    CronJob.objects.sync_from_code(declared())
    before = CronJob.objects.filter(name="reports.nightly").values().get()
    changed = api.client.post("/ojs/v1/cron", json.dumps(nightly(cron="0 5 * * *")), content_type=MEDIA_TYPE)
    deleted = api.client.delete("/ojs/v1/cron/reports.nightly")
    for response in (changed, deleted):
        error = response.json()["error"]
        assert (response.status_code, error["code"], error["details"]["from_code"]) == (409, "conflict", True)
        assert "declared in code" in error["message"]
    assert CronJob.objects.filter(name="reports.nightly").values().get() == before
    # The reply says which schedules are the code's.
    assert api.client.get("/ojs/v1/cron/reports.nightly").json()["cron"]["from_code"] is True
    # A schedule registered over HTTP is still the API's to change and delete.
    http_schedule("ops.ping")
    assert api.client.get("/ojs/v1/cron/ops.ping").json()["cron"]["from_code"] is False
    assert api.client.delete("/ojs/v1/cron/ops.ping").status_code == 200


@pytest.mark.django_db
def test_an_operators_switch_of_a_code_schedule_stands_until_the_codes_enabled_changes(settings):
    """Disabled in the admin at 3 a.m., a code schedule came back on at the next reaper start."""
    def row():
        return CronJob.objects.get(name="reports.nightly")

    settings.OJS = {"CRON": [nightly()]}
    CronJob.objects.sync_from_code(declared())
    CronJob.objects.set_enabled("reports.nightly", False)
    assert CronJob.objects.sync_from_code(declared())["unchanged"] == ["reports.nightly"]
    assert (row().enabled, row().next_run_at) == (False, None)

    # Changed in code otherwise: the schedule changes and stays off.
    settings.OJS = {"CRON": [nightly(cron="30 2 * * *")]}
    assert CronJob.objects.sync_from_code(declared())["changed"] == ["reports.nightly"]
    assert (row().expression, row().enabled, row().next_run_at) == ("30 2 * * *", False, None)

    # The code's own enabled changes: that new declaration wins, both ways.
    settings.OJS = {"CRON": [nightly(cron="30 2 * * *", enabled=False)]}
    CronJob.objects.sync_from_code(declared())
    settings.OJS = {"CRON": [nightly(cron="30 2 * * *")]}
    assert CronJob.objects.sync_from_code(declared())["changed"] == ["reports.nightly"]
    assert row().enabled and row().next_run_at is not None

    # Switched on against the code's "off", it stays on too.
    settings.OJS = {"CRON": [nightly(cron="30 2 * * *", enabled=False)]}
    CronJob.objects.sync_from_code(declared())
    assert not row().enabled
    CronJob.objects.set_enabled("reports.nightly", True)
    CronJob.objects.sync_from_code(declared())
    assert row().enabled and row().next_run_at is not None


@pytest.mark.django_db
def test_a_schedule_synced_before_the_code_declaration_was_kept_takes_the_codes_enabled(settings):
    settings.OJS = {"CRON": [nightly()]}
    CronJob.objects.sync_from_code(declared())
    CronJob.objects.filter(name="reports.nightly").update(enabled=False, next_run_at=None, declared_enabled=None)
    assert CronJob.objects.sync_from_code(declared())["changed"] == ["reports.nightly"]
    row = CronJob.objects.get(name="reports.nightly")
    assert (row.enabled, row.declared_enabled) == (True, True) and row.next_run_at is not None


def test_setting_entries_take_the_bindings_shape():
    spec = schedule_from_setting({"name": "a.b", "expression": "@every 1h",
                                  "job_template": {"type": "x.y", "args": [1]}, "overlap_policy": "allow"})
    assert (spec.expression, spec.overlap_policy, spec.job_template["args"]) == ("@every 1h", "allow", [1])


@pytest.mark.postgres
@pytest.mark.slow
def test_the_reaper_syncs_at_start_and_fires_the_code_schedule(processes):
    http_schedule("ops.ping")
    CronJob.objects.create(name="stale.from-code", expression="0 0 * * *", timezone="UTC", from_code=True,
                           job_template={"type": "x.y", "args": []}, created_at=ago(), updated_at=ago())
    code = [{"name": "probe.every-second", "cron": "@every 1s", "type": "probe.noop", "args": []}]
    reaper = processes("ojs_reaper", "--interval", "0.1", "--cron-interval", "0.2",
                       env={"OJS_CRON": json.dumps(code)})
    reaper.wait_for_output(r"cron schedules from code: added probe.every-second; removed stale.from-code")
    wait_until(lambda: Job.objects.filter(type="probe.noop", cron_name="probe.every-second").exists(),
               PATIENCE, "the code schedule to fire")
    assert set(CronJob.objects.values_list("name", flat=True)) == {"ops.ping", "probe.every-second"}
    reaper.send(signal.SIGTERM)
    assert reaper.wait(timeout=PATIENCE) == 0
