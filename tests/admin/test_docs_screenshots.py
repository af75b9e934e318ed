"""The console as the docs show it: a busy store, each page read in a 1280 x 800 window.

Each page is checked for what the docs' picture of it shows, and saved for the
docs when OJS_DOCS_SCREENSHOTS names a directory (``docs_screenshot`` in tests/admin/browser.py).
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from django_ojs.canvas import chain, group, signature
from django_ojs.core.types import WorkerInfo
from django_ojs.models import Job, Queue, ReaperTick, Worker
from django_ojs.protocol.envelope import parse_job

from .browser import VIEWPORT as DOCS_VIEWPORT
from .browser import docs_screenshot
from .conftest import build_job

# The browser tests' Chromium, logged-in tab and skip conditions, shared rather than copied.
from .test_browser import chromium, expect, page, pytestmark  # noqa: F401


def a_busy_store() -> dict[str, Job]:
    """Jobs in every state on a few queues, a failed job with its history, a live worker, a workflow."""
    made: dict[str, Job] = {}
    for queue, count in (("email", 3), ("billing", 2), ("reports", 1)):
        for _ in range(count):
            build_job("completed", type=f"{queue}.run", queue=queue)
    made["dead"] = build_job(
        "discarded", type="invoice.render", queue="billing", failures=3, args=[{"order_id": 42}],
        backtrace=['at render (billing/jobs.py:42)', 'at fetch_rates (billing/rates.py:17)'],
    )
    build_job("retryable", type="webhook.deliver", queue="webhooks")
    for n in range(4):
        build_job("available", type="email.send", queue="email", args=[f"user{n}@example.com", "Welcome"])
    in_an_hour = (timezone.now() + dt.timedelta(hours=1)).isoformat()
    Job.objects.push(parse_job({"type": "report.build", "args": ["nightly"],
                                "options": {"queue": "reports", "scheduled_at": in_an_hour}}))
    Worker.objects.register("web-1-4242", WorkerInfo(hostname="web-1", pid=4242, queues=["email", "default"],
                                                    concurrency=10, handles=["email.send"]))
    # A type the running worker has no handler for (a deploy on its way), and a reaper ticking.
    build_job("available", type="email.digest", queue="email", args=["weekly"])
    ReaperTick.objects.create(id="reaper-1", started_at=timezone.now(), last_tick_at=timezone.now())
    made["active"] = Job.objects.fetch(["email"], worker_id="web-1-4242")[0]
    made["workflow"] = chain(
        signature("catalogue.import", ["acme"]),
        group(signature("price.sync", ["ACME-1"]), signature("price.sync", ["ACME-2"])),
        signature("catalogue.publish"),
    ).enqueue(name="acme catalogue")
    return made


def scroll_to(tab, heading: str) -> None:
    """Scroll so that this section's heading is at the top of the window."""
    tab.get_by_text(heading, exact=True).first.evaluate("(element) => element.scrollIntoView({block: 'start'})")


@pytest.fixture
def window(page):  # noqa: F811 -- the browser tests' tab, at the docs' size
    page.set_viewport_size(DOCS_VIEWPORT)
    # The admin's page list folded away, as Django's own toggle leaves it: the page gets the width.
    page.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    return page


def test_the_pages_the_docs_show(window, live_server):
    made = a_busy_store()
    base = live_server.url

    window.goto(f"{base}/admin/django_ojs/overview/")
    window.locator("svg.ojs-chart").wait_for(state="visible")
    assert window.locator(".ojs-card-completed .ojs-card-count").inner_text() == "6"
    docs_screenshot(window, "overview")

    window.goto(f"{base}/admin/django_ojs/job/")
    expect(window.locator("#result_list tbody tr")).to_have_count(Job.objects.count())
    docs_screenshot(window, "jobs")

    window.goto(f"{base}/admin/django_ojs/job/{made['dead'].pk}/change/")
    expect(window.locator("li.ojs-error")).to_have_count(3)
    docs_screenshot(window, "job")
    scroll_to(window, "Error history")
    docs_screenshot(window, "job-errors")

    window.goto(f"{base}/admin/django_ojs/deadletterjob/")
    expect(window.locator("#result_list tbody tr")).to_have_count(1)
    docs_screenshot(window, "dead-letter")

    window.goto(f"{base}/admin/django_ojs/worker/")
    expect(window.locator("#result_list tbody tr")).to_have_count(1)
    docs_screenshot(window, "workers")

    window.goto(f"{base}/admin/django_ojs/queue/")
    expect(window.locator("#result_list tbody tr")).to_have_count(Queue.objects.count())
    docs_screenshot(window, "queues")

    window.goto(f"{base}/admin/django_ojs/workflow/{made['workflow'].pk}/change/")
    expect(window.locator("body")).to_contain_text("catalogue.import")
    scroll_to(window, "Steps")
    docs_screenshot(window, "workflow")
