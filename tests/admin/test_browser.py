"""The operators' console in a real browser, against a live server and a real PostgreSQL.

Each test clicks through what an operator does, in a 1280 x 800 window (a
laptop's screen, which every list must fit), and leaves screenshots in
test-artifacts/screenshots/. The two tests that need a running worker start
a real ``manage.py ojs_worker`` process and are skipped where that
command is missing from the tree.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import tempfile
import urllib.request

import pytest
from django.contrib.auth.models import User

from django_ojs.core import queue_settings
from django_ojs.core.clock import db_now
from django_ojs.core.history import HOUR, hour_floor, minute_floor
from django_ojs.core.types import Lease, WorkerInfo
from django_ojs.models import ApiKey, Job, JobError, Queue, StatsBucket, Worker
from django_ojs.protocol.envelope import parse_job
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.states import WorkerState
from tests.helpers import history_running_since

from .browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PASSWORD,
    VIEWPORT,
    WORKER_COMMAND,
    docs_screenshot,
    log_in,
    ojs_worker,
    overflowing,
    run_action,
    screenshot,
    times_not_in_the_format,
    wait_until,
)
from .conftest import build_job

# CI installs Chromium and Playwright (.ci/run, the dev extra): there a missing one fails the run.
IN_CI = bool(os.environ.get("CI"))
pytestmark = [
    pytest.mark.browser,
    pytest.mark.postgres,
    pytest.mark.skipif(
        not CHROMIUM.exists() and not IN_CI, reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    ),
]
if IN_CI:
    import playwright.sync_api as sync_api
else:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
expect = sync_api.expect
needs_worker = pytest.mark.skipif(
    not WORKER_COMMAND.exists(),
    reason="manage.py ojs_worker is not in this tree",
)


@pytest.fixture(scope="module")
def chromium():
    # Playwright's sync API keeps an event loop in this thread; the ORM calls
    # the tests make meanwhile are plain synchronous ones.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="ojs-chromium-"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            # A laptop's screen: every list must fit it (test_lists_fit_1280_px_and_say_times_one_way).
            viewport=VIEWPORT,
        )
        yield context
        context.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def page(chromium, live_server, transactional_db):
    """A logged-in superuser's tab."""
    # PUSH creates a queue's row once per process; the flush between
    # transactional tests deletes the rows but not that memory.
    queue_settings.known_queues.clear()
    User.objects.create_superuser("operator", "operator@example.com", PASSWORD)
    chromium.clear_cookies()
    tab = chromium.new_page()
    tab.set_default_timeout(15_000)
    log_in(tab, live_server.url, "operator")
    yield tab
    tab.close()


def row_of(page, pk: object):
    """The list row holding the object with this primary key."""
    return page.locator(f'tr:has(input.action-select[value="{pk}"]), tr:has([data-pk="{pk}"])')


def test_filter_jobs_and_read_an_error_history(page, live_server):
    build_job("available", type="email.send", meta={"tenant_id": "acme"})
    dead = build_job("discarded", type="invoice.render", queue="billing", failures=3,
                     backtrace=['File "billing.py", line 42, in render', "ConnectionError: db down"])
    build_job("completed", type="email.send", queue="mail")

    page.goto(f"{live_server.url}/admin/django_ojs/job/")
    screenshot(page, "01-jobs")
    page.click('#changelist-filter a[href="?state=discarded"]')
    expect(page).to_have_url(re.compile(r"state=discarded"))
    page.click('#changelist-filter a:text-is("invoice.render")')
    expect(page).to_have_url(re.compile(r"state=discarded&type=invoice.render"))
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("connection refused to smtp:25 (attempt 3)")
    screenshot(page, "02-jobs-filtered")

    page.click("#changelist-filter a:has-text('Clear all filters')")
    page.fill("#searchbar", "tenant_id:acme")
    page.press("#searchbar", "Enter")
    expect(page).to_have_url(re.compile(r"\?q=tenant_id"))
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("email.send")

    page.goto(f"{live_server.url}/admin/django_ojs/job/?state=discarded")
    page.click(f'a:has(code[title="{dead.id}"])')
    expect(page.locator("li.ojs-error")).to_have_count(3)
    backtrace = page.locator("details.ojs-backtrace").last
    assert not backtrace.locator("pre").is_visible()
    backtrace.locator("summary").click()
    assert "ConnectionError: db down" in backtrace.locator("pre").inner_text()
    assert page.locator('form.ojs-move button:text-is("Retry")').is_visible()
    screenshot(page, "03-job-error-history")


def test_pause_and_resume_a_queue(page, live_server):
    build_job("available", queue="billing")
    build_job("available", queue="mail")

    page.goto(f"{live_server.url}/admin/django_ojs/queue/")
    said = run_action(page, "pause_queues", "billing")
    assert "Pause: 1 done." in said
    assert row_of(page, "billing").locator(".ojs-paused").is_visible()
    assert Queue.objects.get(pk="billing").paused
    assert Job.objects.fetch(["billing"]) == []
    screenshot(page, "04-queues-paused")

    said = run_action(page, "resume_queues", "billing", "mail")
    assert "Resume: 1 done, 1 skipped because: not paused (1)." in said
    assert row_of(page, "billing").locator(".ojs-running").is_visible()
    assert not Queue.objects.get(pk="billing").paused
    screenshot(page, "05-queues-resumed")


def test_worker_list_follows_heartbeats_without_reloading(page, live_server):
    Worker.objects.register("worker-7", WorkerInfo(hostname="web-7", pid=77, queues=["default"], concurrency=4))

    page.goto(f"{live_server.url}/admin/django_ojs/worker/")
    page.evaluate("window.ojsNotReloaded = true")
    said = run_action(page, "quiet_workers", "worker-7")
    assert "Quiet: 1 done." in said
    assert "not applied yet" in row_of(page, "worker-7").locator("td.field-directive_status").inner_text()
    page.evaluate("window.ojsNotReloaded = true")

    # The worker's next heartbeat reports that it went quiet.
    Worker.objects.beat("worker-7", state=WorkerState.QUIET)

    directive = row_of(page, "worker-7").locator("td.field-directive_status")
    wait_until(lambda: "applied" in directive.inner_text() and "not" not in directive.inner_text(), 60,
               "the directive cell to show the quiet as applied")
    assert row_of(page, "worker-7").locator("td.field-reported_state").inner_text().startswith("quiet")
    assert page.evaluate("window.ojsNotReloaded") is True
    screenshot(page, "06-workers-live")


def test_every_screen(page, live_server):
    """Overview, dead letter, workers and API keys render, and the key's secret is shown once."""
    build_job("completed", queue="mail")
    build_job("discarded", queue="billing", failures=2)
    build_job("available", queue="mail")
    Worker.objects.register("worker-1", WorkerInfo(hostname="web-1", pid=11, queues=["mail"], concurrency=10))

    page.goto(f"{live_server.url}/admin/")
    page.click("a:text-is('Overview')")
    # The click returns before the overview has loaded: wait for the chart (is_visible() does not).
    page.locator("svg.ojs-chart").wait_for(state="visible")
    assert page.locator(".ojs-card-completed .ojs-card-count").inner_text() == "1"
    screenshot(page, "07-overview")

    page.goto(f"{live_server.url}/admin/django_ojs/deadletterjob/")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    screenshot(page, "08-dead-letter")

    page.goto(f"{live_server.url}/admin/django_ojs/apikey/add/")
    page.fill("#id_name", "billing service")
    page.check('input[name="scopes"][value="enqueue"]')
    page.click('input[type="submit"][name="_create"]')
    secret = page.input_value("#ojs-secret")
    assert secret.startswith("ojs_")
    screenshot(page, "09-api-key-created")
    page.goto(f"{live_server.url}/admin/django_ojs/apikey/")
    assert secret not in page.content()
    assert ApiKey.objects.authenticate(secret).name == "billing service"
    screenshot(page, "10-api-keys")


def test_failed_jobs_say_what_each_is_kept_as_and_filter_by_it(page, live_server):
    """A dead letter and a plain discard on the Failed jobs page: which is which, until when, and on each page."""
    dead, plain = (Job.objects.push(parse_job({"type": "report.build", "args": [], "options": {
        "queue": queue, "retry": {"max_attempts": 1, "on_exhaustion": kept}}})) for queue, kept in (
        ("reports", "dead_letter"), ("thumbnails", "discard")))
    for job in (dead, plain):
        Job.objects.fetch([job.queue], worker_id="w-kept")
        Job.objects.fail(job.id, Failure(type="ValueError", message="bad input"))
    dead, plain = Job.objects.get(pk=dead.pk), Job.objects.get(pk=plain.pk)
    # As the console writes times: UTC to the second (the distance beside it).
    until = {job.pk: job.kept_until.strftime("%Y-%m-%d %H:%M:%SZ") for job in (dead, plain)}

    page.goto(f"{live_server.url}/admin/django_ojs/deadletterjob/")
    expect(page.locator("h1, #content h1").first).to_contain_text("Failed jobs")
    # The list: the date, the whole time on hover.
    expect(row_of(page, dead.pk)).to_contain_text(f"kept as dead letter until {until[dead.pk][:10]}")
    expect(row_of(page, plain.pk)).to_contain_text(f"discarded, kept until {until[plain.pk][:10]}")
    expect(row_of(page, dead.pk).locator(".field-kept_as time")).to_have_attribute("title", until[dead.pk])
    page.click('#changelist-filter a[href="?kept=dead_letter"]')
    expect(page).to_have_url(re.compile(r"kept=dead_letter"))
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(row_of(page, dead.pk)).to_have_count(1)

    page.goto(f"{live_server.url}/admin/django_ojs/job/{dead.pk}/change/")
    expect(page.locator(".field-dead_letter_kept")).to_contain_text(f"yes — kept until {until[dead.pk]}")
    page.goto(f"{live_server.url}/admin/django_ojs/job/{plain.pk}/change/")
    expect(page.locator(".field-dead_letter_kept")).to_contain_text(f"no — discarded, kept until {until[plain.pk]}")


def _dead_job(type_: str, queue: str) -> Job:
    """A job that failed for good on an earlier worker, its error in the history."""
    job = Job.objects.push(parse_job({"type": type_, "args": [42], "options": {"queue": queue}}))
    Job.objects.fetch([queue], worker_id="an-older-worker")
    failure = Failure(type="KeyError", message="'customer' (a bug since fixed)", retryable=False,
                      backtrace=['File "handlers.py", line 7, in recoverable'])
    Job.objects.fail(job.id, failure)
    job.refresh_from_db()
    assert job.state == "discarded"
    return job


@needs_worker
def test_retry_a_dead_job_and_see_a_worker_complete_it(page, live_server):
    from .worker_app.jobs import RECOVERABLE

    dead = _dead_job(RECOVERABLE, "admin-e2e")

    page.goto(f"{live_server.url}/admin/django_ojs/deadletterjob/")
    said = run_action(page, "retry_jobs", str(dead.pk))
    assert "Retry: 1 done." in said
    assert Job.objects.get(pk=dead.pk).state == "available"
    screenshot(page, "11-dead-letter-retried")

    with ojs_worker("admin-e2e"):
        page.goto(f"{live_server.url}/admin/django_ojs/job/{dead.pk}/change/")

        def completed() -> bool:
            page.reload()
            return page.locator(".ojs-state-completed").count() > 0

        wait_until(completed, 60, "the worker to complete the retried job")
    assert Job.objects.get(pk=dead.pk).result == {"recovered": True}
    # The history of the attempt that died is kept for the post-mortem.
    assert JobError.objects.filter(job_id=dead.pk).count() == 1
    assert "a bug since fixed" in page.inner_text("body")
    screenshot(page, "12-retried-job-completed")


@needs_worker
def test_quiet_a_live_worker_and_watch_it_apply(page, live_server):
    with ojs_worker("admin-e2e-idle") as process:
        worker = wait_until(lambda: Worker.objects.filter(pid=process.pid).first(), 60,
                            "the ojs_worker process to register")
        page.goto(f"{live_server.url}/admin/django_ojs/worker/")
        assert row_of(page, worker.pk).locator(".ojs-worker-running").is_visible()

        said = run_action(page, "quiet_workers", worker.pk)
        assert "Quiet: 1 done." in said
        screenshot(page, "13-worker-quiet-requested")

        state = row_of(page, worker.pk).locator("td.field-reported_state")
        directive = row_of(page, worker.pk).locator("td.field-directive_status")
        wait_until(lambda: state.inner_text().startswith("quiet") and "✓ applied" in directive.inner_text(), 30,
                   "the worker to report quiet on the page, without a reload")
        screenshot(page, "14-worker-quiet-applied")

        said = run_action(page, "resume_workers", worker.pk)
        assert "Resume: 1 done." in said
        wait_until(lambda: state.inner_text().startswith("running"), 30, "the worker to run again")
        screenshot(page, "15-worker-resumed")


def test_cron_schedules_disable_enable_and_fire_now(page, live_server):
    from django_ojs.models import CronJob
    from django_ojs.protocol.cron_jobs import CronSpec

    CronJob.objects.register(CronSpec(name="nightly-report", expression="0 3 * * *", timezone="UTC",
                                      job_template={"type": "report.build", "args": []}))
    page.goto(f"{live_server.url}/admin/django_ojs/cronjob/")
    row = row_of(page, "nightly-report")
    expect(row).to_contain_text("0 3 * * *")
    expect(row).to_contain_text("03:00:00Z")
    screenshot(page, "20-cron")
    assert "Disable: 1 done." in run_action(page, "disable_schedules", "nightly-report")
    expect(row_of(page, "nightly-report").locator(".ojs-paused")).to_have_text("disabled")
    assert "Enable: 1 done." in run_action(page, "enable_schedules", "nightly-report")
    assert "Fire now: 1 done." in run_action(page, "fire_now", "nightly-report")
    assert Job.objects.filter(cron_name="nightly-report", type="report.build").count() == 1
    screenshot(page, "21-cron-fired")


def test_configure_a_queue_and_see_its_limits(page, live_server):
    build_job("available", queue="billing")
    page.goto(f"{live_server.url}/admin/django_ojs/queue/")
    row_of(page, "billing").locator('a[title="configure"]').click()
    expect(page.locator("h1")).to_have_text("Configure queue billing")
    page.fill("#id_concurrency", "4")
    page.fill("#id_rate_limit", "120")
    page.fill("#id_rate_period", "PT1M")
    page.fill("#id_max_size", "5000")
    page.fill("#id_fairness_key", "meta.tenant")
    screenshot(page, "22-queue-configure")
    page.click('input[name="_save"]')
    expect(page.locator("ul.messagelist")).to_contain_text("Configure billing: done.")
    expect(row_of(page, "billing")).to_contain_text("0 / 4 active; rate 120 per PT1M")
    expect(row_of(page, "billing")).to_contain_text("5,000 (reject)")
    expect(row_of(page, "billing")).to_contain_text("fair by meta.tenant")
    # Waiting, nothing finished yet: no rate to estimate the time to drain from.
    expect(row_of(page, "billing").locator("td.field-oldest_waiting .ojs-drain")).to_have_text("no rate")
    queue = Queue.objects.get(pk="billing")
    assert (queue.concurrency, queue.rate_limit, queue.max_size) == (4, {"limit": 120, "period": "PT1M"}, 5000)
    assert queue.fairness_key == "meta.tenant"
    assert len(Job.objects.fetch(["billing"], count=10)) == 1
    screenshot(page, "23-queue-limits")


def test_retry_everything_a_filter_matches_after_a_confirmation(page, live_server):
    from tests.job_rows import insert_jobs

    # More than a page (50 rows), so "Select all" is what reaches the rest.
    insert_jobs(60, queue="flood", type="webhook.deliver")
    insert_jobs(3, queue="calm", type="webhook.deliver")

    page.goto(f"{live_server.url}/admin/django_ojs/deadletterjob/?queue=flood")
    page.check("#action-toggle")
    page.click("span.question a")
    expect(page.locator("span.all")).to_contain_text("60")
    page.select_option('select[name="action"]', "retry_jobs")
    page.click('button[name="index"]')

    expect(page.locator(".ojs-movable-count")).to_have_text("60")
    expect(page.locator(".ojs-filter")).to_contain_text("queue=flood")
    assert Job.objects.filter(state="discarded").count() == 63
    screenshot(page, "13-filter-wide-retry-confirmation")
    page.click('input[type="submit"][value="Yes, retry them all"]')

    expect(page.locator("ul.messagelist")).to_contain_text(
        "Retry, everything matching the filter: 60 done in 1 batches."
    )
    assert Job.objects.filter(queue="flood", state="available").count() == 60
    assert Job.objects.filter(queue="calm", state="discarded").count() == 3
    screenshot(page, "14-filter-wide-retry-done")


def test_click_through_a_failed_workflow_retry_its_step_and_cancel_it(page, live_server):
    from django_ojs.core import workflows as workflow_store
    from django_ojs.core.types import Lease
    from django_ojs.models import Workflow
    from django_ojs.protocol.workflows import parse

    workflow = workflow_store.create(parse({"type": "chain", "name": "nightly-import", "steps": [
        {"type": "fetch.url", "args": [], "options": {"queue": "wf"}},
        {"type": "group", "jobs": [
            {"type": "parse.csv", "args": [], "options": {"queue": "wf", "retry": {"max_attempts": 1}}},
            {"type": "parse.pdf", "args": [], "options": {"queue": "wf"}},
        ]},
        {"type": "store.all", "args": [], "options": {"queue": "wf"}},
    ]}, max_jobs=10, job_options=workflow_store.job_options()))
    first = Job.objects.fetch(["wf"], worker_id="w")[0]
    Job.objects.ack(first.id, result={"rows": 3}, lease=Lease("w"))
    csv, pdf = Job.objects.fetch(["wf"], count=2, worker_id="w")
    Job.objects.fail(csv.id, Failure(type="CsvError", message="line 7: bad quote", retryable=False), lease=Lease("w"))
    Job.objects.ack(pdf.id, result="ok", lease=Lease("w"))

    page.goto(f"{live_server.url}/admin/django_ojs/workflow/")
    page.click("text=nightly-import")
    steps = page.locator(".ojs-wf-job")
    expect(steps).to_have_count(4)
    expect(page.locator('.ojs-wf-job[data-path="1.0"]')).to_contain_text("CsvError line 7: bad quote")
    expect(page.locator('.ojs-wf-job[data-path="0"]')).to_contain_text('result: {"rows": 3}')
    expect(page.locator('.ojs-wf-job[data-path="2"]')).to_contain_text("cancelled")
    screenshot(page, "10-workflow-failed")

    # The failed step's job page links back to the workflow.
    page.locator('.ojs-wf-job[data-path="1.0"] a:text-is("job")').click()
    page.click(f"text={workflow.id}")
    page.locator('.ojs-wf-job[data-path="1.0"] button:text-is("Retry from here")').click()
    expect(page.locator("ul.messagelist")).to_contain_text("enqueued again")
    expect(page.locator('.ojs-wf-chain > .ojs-wf-head')).to_contain_text("running")
    assert Job.objects.filter(type="parse.csv", state="available").count() == 1
    screenshot(page, "11-workflow-retried")

    page.click('button:text-is("Cancel workflow")')
    expect(page.locator("ul.messagelist")).to_contain_text("Workflow cancelled")
    assert Workflow.objects.get(pk=workflow.pk).state == "cancelled"
    assert not Job.objects.filter(state="available").exists()


def test_a_batch_grown_while_it_runs_shows_every_job_and_their_counts(page, live_server):
    from django_ojs.core import workflows as workflow_store
    from django_ojs.core.types import Lease
    from django_ojs.protocol.workflows import parse

    workflow = workflow_store.create(parse({"type": "batch", "name": "crawl", "jobs": [
        {"type": "crawl.page", "args": ["/"], "options": {"queue": "crawl"}},
    ], "callbacks": {"on_complete": {"type": "crawl.report", "args": [], "options": {"queue": "crawl-cb"}}}},
        max_jobs=10, job_options=workflow_store.job_options()))
    workflow_store.add_jobs(workflow.id, {"jobs": [
        {"type": "crawl.page", "args": [link], "options": {"queue": "crawl"}} for link in ("/a", "/b")]})
    root = Job.objects.fetch(["crawl"], worker_id="w")[0]
    Job.objects.ack(root.id, result="/", lease=Lease("w"))

    page.goto(f"{live_server.url}/admin/django_ojs/workflow/")
    page.click("text=crawl")
    expect(page.locator(".ojs-wf-batch > .ojs-wf-members > .ojs-wf-job")).to_have_count(3)  # the added two drawn
    expect(page.locator('.ojs-wf-job[data-path="2"]')).to_contain_text("pending")
    expect(page.locator(".field-jobs")).to_contain_text("1 of 3 ended (33%): 1 completed, 2 pending")
    expect(page.locator('.ojs-wf-job[data-path="on_complete"]')).to_contain_text("waiting")


@needs_worker
def test_a_handlers_progress_shows_live_on_the_job_page_in_the_list_and_over_http(page, live_server, tmp_path):
    import json
    import urllib.request

    import django_ojs

    from .worker_app.jobs import PROGRESS

    release = tmp_path / "release"
    job = django_ojs.enqueue(PROGRESS, [str(release)], queue="admin-e2e-progress")
    _, secret = ApiKey.objects.issue("progress reader", ["read"])
    with ojs_worker("admin-e2e-progress"):
        page.goto(f"{live_server.url}/admin/django_ojs/job/{job.pk}/change/")
        # No reload: the box refreshes itself while the job runs.
        expect(page.locator(".ojs-progress-figure")).to_have_text("42%", timeout=60_000)
        assert '"phase": "copying"' in page.inner_text(".ojs-progress")
        expect(page.locator(".ojs-progress-message")).to_have_text("copying rows 1-420")
        screenshot(page, "20-job-progress-live")

        request = urllib.request.Request(
            f"{live_server.url}/ojs/v1/jobs/{job.id}/progress", headers={"Authorization": f"Bearer {secret}"}
        )
        with urllib.request.urlopen(request) as response:
            body = json.loads(response.read())
        assert (body["state"], body["progress"], body["data"]) == ("active", 0.42, {"phase": "copying", "rows": 420})
        assert body["message"] == "copying rows 1-420"  # the page and the API say the same

        page.goto(f"{live_server.url}/admin/django_ojs/job/?q={job.id}")
        expect(row_of(page, job.pk).locator(".ojs-progress-cell")).to_have_text("42%")

        page.goto(f"{live_server.url}/admin/django_ojs/job/{job.pk}/change/")
        release.touch()
        # Completed: 100 % (ojs-progress §8.1), shown by the same live box.
        expect(page.locator(".ojs-progress-figure")).to_have_text("100%", timeout=60_000)
    assert Job.objects.get(pk=job.pk).state == "completed"


# -- the console at 1280 px -------------------------------------------------------------

LONG_TYPE = "billing.invoice.render_monthly_statement_for_customer"
LONG_QUEUE = "customer-notifications-eu-west-1"
# A message with a token no space breaks: a URL, a path, a key.
LONG_ERROR = (
    "duplicate key value violates unique constraint \"invoice_number_key\" while rendering "
    "https://billing.example.com/api/v2/customers/9f7c1e2a-5b7d-4c1e-8a2f-3d4e5f6a7b8c/invoices/2026-11/"
    "statement.pdf?include=lines,taxes,discounts,adjustments " + "and then the same again; " * 180
)


def _a_busy_console() -> dict[str, object]:
    """Jobs in every state with long names and a long error, workers in every condition,
    limited and paused queues, a schedule, a workflow, keys: what each list must fit."""
    from django_ojs.core import queue_config
    from django_ojs.core import workflows as workflow_store
    from django_ojs.core.types import HeldJob
    from django_ojs.models import CronJob
    from django_ojs.protocol.cron_jobs import CronSpec
    from django_ojs.protocol.workflows import parse

    for state in ("available", "scheduled", "pending", "cancelled"):
        build_job(state, type=LONG_TYPE, queue=LONG_QUEUE, meta={"tenant_id": "acme"})
    build_job("active", type="email.send", queue="mail-active")
    build_job("retryable", type="email.send", queue="mail-retry")
    build_job("completed", type="report.build", queue="reports")
    dead = Job.objects.push(parse_job({"type": LONG_TYPE, "args": [42], "options": {"queue": "billing"}}))
    Job.objects.fetch(["billing"], worker_id="web-3-4242")
    Job.objects.fail(dead.id, Failure(type="psycopg.errors.UniqueViolation", message=LONG_ERROR, retryable=False,
                                      backtrace=['File "billing/render.py", line 88, in render']))

    info = WorkerInfo(hostname="worker-host-eu-west-1a.internal", pid=4242,
                      queues=["default", "mail", "billing", LONG_QUEUE], concurrency=10)
    Worker.objects.register("0193a2b4-6f1e-7c2d-9e3f-4a5b6c7d8e9f", info)
    Worker.objects.register("web-3-4242", info)
    draining = Worker.objects.register("draining-worker", info)
    held = [build_job("active", type="email.send", queue=f"drain-{n}") for n in range(2)]
    Job.objects.filter(pk__in=[job.pk for job in held]).update(worker_id=draining.pk)
    Worker.objects.beat(draining.pk, state=WorkerState.TERMINATE, held=[HeldJob(str(job.id)) for job in held])
    asked = Worker.objects.register("asked-to-quiet", info)
    Worker.objects.set_directive([asked.pk], WorkerState.QUIET)
    silent = Worker.objects.register("silent-worker", info)
    Worker.objects.filter(pk=silent.pk).update(last_heartbeat_at=silent.last_heartbeat_at - dt.timedelta(minutes=5))

    queue_config.update("billing", {"concurrency": 4, "rate_limit": {"limit": 120, "period": "PT1M"}, "max_size": 5000})
    Queue.objects.pause("reports")
    CronJob.objects.register(CronSpec(name="nightly-billing-statements", expression="0 3 * * *", timezone="UTC",
                                      job_template={"type": LONG_TYPE, "args": []}))
    workflow_store.create(parse({"type": "chain", "name": "nightly-import", "steps": [
        {"type": "fetch.url", "args": [], "options": {"queue": "wf"}},
        {"type": "store.all", "args": [], "options": {"queue": "wf"}},
    ]}, max_jobs=10, job_options=workflow_store.job_options()))
    ApiKey.objects.issue("billing service", ["enqueue", "read"])
    ApiKey.objects.issue("SDK workers in the eu-west-1 cluster", ["worker"])
    return {"dead": dead, "draining": draining}


LISTS = {
    "overview": "/admin/django_ojs/overview/",
    "jobs": "/admin/django_ojs/job/",
    "failed jobs": "/admin/django_ojs/deadletterjob/",
    "workers": "/admin/django_ojs/worker/",
    "queues": "/admin/django_ojs/queue/",
    "cron": "/admin/django_ojs/cronjob/",
    "rate limits": "/admin/django_ojs/ratelimitoverride/",
    "workflows": "/admin/django_ojs/workflow/",
    "keys": "/admin/django_ojs/apikey/",
}


def test_lists_fit_1280_px_and_say_times_one_way(page, live_server):
    """Every list's columns and buttons lie inside a 1280 px window, with no sideways scroll,
    and every page writes its times one way: 2026-11-27 10:04:05Z, with the distance beside it."""
    made = _a_busy_console()
    dead = made["dead"]
    problems: dict[str, list[str]] = {}

    def look(name: str, path: str) -> None:
        page.goto(live_server.url + path)
        found = overflowing(page) + [f"time written otherwise: {text}" for text in times_not_in_the_format(page)]
        if found:
            problems[name] = found

    for name, path in LISTS.items():
        look(name, path)
        if name == "overview":
            page.locator("svg.ojs-chart").wait_for(state="visible")
            docs_screenshot(page, "overview")
        elif name in ("jobs", "failed jobs", "workers"):
            docs_screenshot(page, name.replace(" ", "-"))
        if name != "overview" and name != "rate limits":
            assert page.locator("#result_list tbody tr").count() > 0, f"{name}: no row to measure"
    look("job page", f"/admin/django_ojs/job/{dead.pk}/change/")
    docs_screenshot(page, "job")
    look("worker page", f"/admin/django_ojs/worker/{made['draining'].pk}/change/")
    look("filtered jobs", f"/admin/django_ojs/job/?state=discarded&type={LONG_TYPE}")

    assert problems == {}, "\n".join(f"{name}: {found}" for name, found in problems.items())


def test_a_failed_jobs_error_wraps_in_the_list_and_is_whole_on_its_page(page, live_server):
    made = _a_busy_console()
    page.goto(f"{live_server.url}/admin/django_ojs/deadletterjob/")
    preview = row_of(page, made["dead"].pk).locator(".ojs-error-preview")
    shown = preview.inner_text()
    assert shown.startswith("psycopg.errors.UniqueViolation duplicate key value") and shown.endswith("…")
    # Wrapped onto several lines, not cut to one: as tall as the text is long.
    assert preview.bounding_box()["height"] > 3 * 16
    # Whole on the job's page (the store keeps up to MAX_MESSAGE_CHARS of it).
    page.click(f'a:has(code[title="{made["dead"].id}"])')
    assert page.locator("pre.ojs-error-message").inner_text() == LONG_ERROR
    assert len(LONG_ERROR) > 4000


def test_a_short_id_copies_the_whole_id(page, live_server):
    job = build_job("available")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.goto(f"{live_server.url}/admin/django_ojs/job/")
    cell = row_of(page, job.pk).locator("td.field-type_and_id")
    assert cell.locator("code.ojs-id").inner_text() == f"…{str(job.id)[-8:]}"
    cell.locator("button.ojs-copy").click()
    expect(cell.locator("button.ojs-copy")).to_have_class(re.compile("ojs-copied"))
    assert page.evaluate("navigator.clipboard.readText()") == str(job.id)
    # The whole id finds the job.
    page.fill("#searchbar", page.evaluate("navigator.clipboard.readText()"))
    page.press("#searchbar", "Enter")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)


def test_a_draining_worker_is_calm(page, live_server):
    made = _a_busy_console()
    page.goto(f"{live_server.url}/admin/django_ojs/worker/")
    state = row_of(page, made["draining"].pk).locator("td.field-reported_state")
    expect(state).to_have_text("draining 2 jobs still running")
    badge = state.locator(".ojs-worker")
    red = "rgb(186, 33, 33)"
    assert badge.evaluate("(element) => getComputedStyle(element).backgroundColor") != red
    asked = row_of(page, "asked-to-quiet").locator("td.field-directive_status").inner_text()
    assert re.fullmatch(r"quiet requested (now|\d+ s ago), not applied yet", asked), asked


def test_the_overview_names_what_needs_attention_and_each_line_leads_to_its_jobs(page, live_server):
    from django_ojs.core.clock import db_now
    from django_ojs.models import ReaperTick

    discarded = Job.objects.push(parse_job({"type": "invoice.render", "args": [1], "options": {"queue": "billing"}}))
    Job.objects.fetch(["billing"], worker_id=None)
    Job.objects.fail(discarded.id, Failure(type="RenderError", message="no template", retryable=False))
    Worker.objects.register("w-live", WorkerInfo(queues=["default"], handles=["email.send"]))
    Worker.objects.register("w-gone", WorkerInfo(queues=["mail"], handles=["email.send"]))
    Worker.objects.filter(pk="w-gone").update(last_heartbeat_at=db_now() - dt.timedelta(minutes=5))
    assert Worker.objects.reap_dead(100) == 0  # declared dead: nothing held to recover
    unrunnable = Job.objects.push(parse_job({"type": "report.new_kind", "args": [], "options": {"queue": "default"}}))
    stopped_at = db_now() - dt.timedelta(minutes=5)
    ReaperTick.objects.create(id="reaper-1", started_at=stopped_at, last_tick_at=stopped_at)

    overview = f"{live_server.url}/admin/django_ojs/overview/"
    page.goto(overview)
    notes = page.locator("ul.ojs-attention")
    expect(notes.locator('[data-attention="discarded"]')).to_contain_text(
        "1 job(s) discarded or dead-lettered in the last hour")
    expect(notes.locator('[data-attention="unrunnable"]')).to_contain_text(
        "1 job(s) of type report.new_kind on queue default that no running worker can handle")
    expect(notes.locator('[data-attention="dead"]')).to_contain_text("1 worker(s) declared dead in the last hour")
    reaper = notes.locator('[data-attention="reaper"]')
    expect(reaper).to_contain_text(re.compile(r"No reaper for \d+ s"))
    assert reaper.locator("a").evaluate("(element) => getComputedStyle(element).color") == "rgb(186, 33, 33)"
    screenshot(page, "07-overview-attention")

    notes.locator('[data-attention="discarded"] a').click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("#result_list")).to_contain_text(str(discarded.id)[-8:])
    assert "state=discarded" in page.url and "finished_within=1h" in page.url

    page.goto(overview)
    notes.locator('[data-attention="unrunnable"] a').click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("#result_list")).to_contain_text(str(unrunnable.id)[-8:])
    assert "type=report.new_kind" in page.url and "queue=default" in page.url

    page.goto(overview)
    notes.locator('[data-attention="dead"] a').click()
    expect(row_of(page, "w-gone").locator("td.field-reported_state")).to_contain_text("dead")

    page.goto(overview)
    notes.locator('[data-attention="reaper"] a').click()
    assert "state=retryable" in page.url  # what waits for a reaper: retries come due only through it

    # A reaper ticking again: no alarm, its last tick said quietly.
    ReaperTick.objects.filter(pk="reaper-1").update(last_tick_at=db_now())
    page.goto(overview)
    expect(page.locator('[data-attention="reaper"]')).to_have_count(0)
    expect(page.locator('[data-reaper="ticking"]')).to_contain_text("Reaper: last tick")
def test_the_overview_chart_offers_the_last_hour_day_and_month_and_draws_what_the_admin_api_reads(
        page, live_server):
    """The chart's three windows, chosen by link, each drawn from the statistics history, hour by hour
    the figures GET /ojs/v1/admin/stats/history answers."""
    now = db_now()
    history_running_since(minute_floor(now) - dt.timedelta(days=40))
    three_hours_ago = hour_floor(now) - dt.timedelta(hours=3)
    StatsBucket.objects.create(span=HOUR, start=three_hours_ago, queue="mail", transition="completed", count=40)
    StatsBucket.objects.create(span=HOUR, start=three_hours_ago, queue="sms", transition="discarded", count=6)
    _, key = ApiKey.objects.issue("chart reader", ["read"])
    since = three_hours_ago.strftime("%Y-%m-%dT%H:%M:%SZ")
    request = urllib.request.Request(f"{live_server.url}/ojs/v1/admin/stats/history?period=1h&since={since}",
                                     headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        [point, *_] = json.load(response)["data"]
    assert (point["processed"], point["failed"]) == (40, 6)
    chart = page.locator("svg.ojs-chart")
    hovers = chart.locator("rect.ojs-hover")

    page.goto(f"{live_server.url}/admin/django_ojs/overview/")
    expect(page.locator(".ojs-chart-choices strong")).to_have_text("last hour")
    expect(page.locator("h2", has_text="Completed and failed")).to_have_text(
        "Completed and failed per minute, last hour")
    expect(hovers).to_have_count(60)

    page.locator(".ojs-chart-choices a", has_text="last day").click()
    expect(page.locator(".ojs-chart-choices strong")).to_have_text("last day")
    expect(hovers).to_have_count(24)
    titles = [hovers.nth(index).locator("title").text_content() or "" for index in range(24)]
    drawn = [title for title in titles if "0 completed, 0 failed (discarded)" not in title]
    assert drawn == [f"{three_hours_ago:%Y-%m-%d %H:%M} UTC: {point['processed']} completed, "
                     f"{point['failed']} failed (discarded)"]

    page.locator(".ojs-chart-choices a", has_text="last 30 days").click()
    expect(page.locator(".ojs-chart-choices strong")).to_have_text("last 30 days")
    expect(hovers).to_have_count(30)
    screenshot(page, "23-overview-chart-month")


def test_the_overview_keeps_its_workers_live_whatever_chart_it_shows(page, live_server):
    """The chart's ?chart= is the overview's own: the live workers are not asked to filter by it."""
    Worker.objects.register("worker-8", WorkerInfo(hostname="web-8", pid=88, queues=["default"], concurrency=4))
    failures = []
    page.on("response", lambda response: failures.append(response.url) if response.status >= 400 else None)

    page.goto(f"{live_server.url}/admin/django_ojs/overview/?chart=day")
    expect(page.locator(".ojs-chart-choices strong")).to_have_text("last day")
    expect(page.locator(".ojs-live-status")).to_contain_text("Live: updated")
    assert not [url for url in failures if "/live/" in url]


def test_find_a_job_waiting_for_a_signal_and_send_it(page, live_server):
    job = Job.objects.push(parse_job({"type": "order.ship", "args": [42], "options": {"queue": "orders"}}))
    Job.objects.fetch(["orders"], worker_id="w1")
    Job.objects.wait(job.id, "approved", dt.timedelta(hours=1), lease=Lease("w1", 1))

    page.goto(f"{live_server.url}/admin/django_ojs/job/")
    page.click('#changelist-filter a[href="?waiting=signal"]')
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("waits for approved")
    page.click(f'a:has(code[title="{job.id}"])')
    expect(page.locator("code.ojs-waiting-for")).to_have_text("approved")
    page.click("a.ojs-signal-link")
    expect(page.locator("#ojs-signal-name")).to_have_value("approved")
    page.fill("#ojs-signal-payload", '{"by": "ann"}')
    screenshot(page, "job-send-signal")
    page.click('input[type="submit"][value="Send the signal"]')
    expect(page.locator("ul.messagelist")).to_contain_text("Signal approved delivered; the job is available.")
    expect(page.locator('[data-signal="approved"]')).to_be_visible()
    stored = Job.objects.get(id=job.id)
    assert (stored.state, stored.signals["approved"]["payload"]) == ("available", {"by": "ann"})


def test_a_durable_jobs_page_shows_its_checkpoint_and_its_steps_with_their_attempts(page, live_server):
    from django_ojs.core.durable import record_step
    from django_ojs.core.progress import report_progress
    from django_ojs.core.types import Lease
    from django_ojs.protocol.progress import make

    job = Job.objects.push(parse_job({"type": "order.fulfil", "args": [7], "options": {
        "queue": "durable-page", "retry": {"max_attempts": 3, "initial_interval": "PT1S"}}}))
    [first] = Job.objects.fetch(["durable-page"], worker_id="w-1")
    assert report_progress(job.id, make(checkpoint={"packed": 3}), attempt=1, worker_id="w-1")
    record_step(job.id, "charge", {"charge_id": "ch_3Nf9"}, attempt=1, worker_id="w-1")
    Job.objects.fail(job.id, Failure(type="ConnectionError", message="carrier down"), lease=Lease("w-1", 1))
    Job.objects.filter(pk=job.pk).update(run_at=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    Job.objects.promote_due(10)
    [second] = Job.objects.fetch(["durable-page"], worker_id="w-2")
    assert second.attempt == 2
    record_step(job.id, "ship", {"label": "LBL-7"}, attempt=2, worker_id="w-2")

    page.goto(f"{live_server.url}/admin/django_ojs/job/{job.pk}/change/")
    steps = page.locator("table.ojs-steps tr.ojs-step")
    expect(steps).to_have_count(2)
    expect(steps.nth(0).locator(".ojs-step-name")).to_have_text("charge")
    expect(steps.nth(0).locator(".ojs-step-attempt")).to_have_text("1")
    expect(steps.nth(1).locator(".ojs-step-name")).to_have_text("ship")
    expect(steps.nth(1).locator(".ojs-step-attempt")).to_have_text("2")
    assert "ch_3Nf9" in steps.nth(0).inner_text() and "LBL-7" in steps.nth(1).inner_text()
    facts = page.locator("fieldset:has-text('Checkpoint and steps')")
    assert '"packed": 3' in facts.inner_text()
    assert first.attempt == 1
    screenshot(page, "30-job-durable-steps")
