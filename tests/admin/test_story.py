"""A job's page tells its whole story: events beside errors, and its progress; bounded."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from django_ojs.admin import job_pages
from django_ojs.core import events
from django_ojs.core.clock import db_now
from django_ojs.core.progress import report_progress
from django_ojs.core.types import Lease
from django_ojs.models import Job, Worker
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.progress import Report

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(client):
    user = User.objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def page_of(client, job, query: str = "") -> str:
    response = client.get(f"/admin/django_ojs/job/{job.pk}/change/{query}")
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_says_why_a_job_ran_three_times(admin, push):
    job = push(type="story.job", options={"queue": "story", "retry": {"max_attempts": 5}})
    for worker, how in (("w-one", "recovered"), ("w-two", "failed")):
        Worker.objects.register(worker)
        Job.objects.fetch(["story"], worker_id=worker)
        if how == "recovered":
            Job.objects.fail(job.id, Failure(type="worker_death", message="w-one stopped beating"),
                             lease=Lease(worker_id=worker), requeue=True)
        else:
            Job.objects.fail(job.id, Failure(type="ValueError", message="bad row 7"), lease=Lease(worker_id=worker))
    Job.objects.cancel(job.id)
    html = page_of(admin, job)
    assert "Events" in html and "Error history" in html
    for text in ("job.started", "w-one", "w-two", "worker_death", "back in its queue", "ValueError: bad row 7",
                 "job.retrying", "job.cancelled", "was retryable"):
        assert text in html, text
    # claims in order, each with its attempt
    assert html.index("w-one") < html.index("w-two")


def test_thousands_of_progress_reports_do_not_push_the_story_off_the_page(admin, api, push):
    job = push(type="story.busy", options={"queue": "busy", "retry": {"max_attempts": 3}})
    Worker.objects.register("w-busy")
    Job.objects.fetch(["busy"], worker_id="w-busy")
    now = db_now()
    events.record(events.job_event("job.progress", job, now, progress_percent=i) for i in range(1200))
    Job.objects.fail(job.id, Failure(type="ValueError", message="bad row 7"), lease=Lease(worker_id="w-busy"))
    html = page_of(admin, job)
    for text in ("job.enqueued", "job.started", "w-busy", "job.failed", "ValueError: bad row 7", "job.retrying"):
        assert text in html, text
    assert 'class="ojs-event ojs-event-jobprogress"' not in html
    assert "Progress reports: 1200, not listed above" in html and "progress % 1199" in html
    assert "Only the latest" not in html
    # The admin API's job detail tells the same story.
    told = [event["type"] for event in api.get(f"/ojs/v1/admin/jobs/{job.id}").json()["events"]]
    assert told == ["job.enqueued", "job.started", "job.failed", "job.retrying"]
    assert html.count('class="ojs-event ') == len(told)


def test_a_job_with_thousands_of_lifecycle_events_shows_the_latest_and_offers_more(admin, push):
    job = push(type="story.busy")
    now = db_now()
    events.record(events.job_event("job.enqueued", job, now, requeued=True, attempt=i) for i in range(1200))
    html = page_of(admin, job)
    assert html.count('class="ojs-event ') == job_pages.EVENT_HISTORY_LIMIT
    assert "?events=all" in html and "Only the latest 50 lifecycle events" in html
    more = page_of(admin, job, "?events=all")
    assert more.count('class="ojs-event ') == job_pages.EVENT_HISTORY_MAX


def test_progress_on_the_page_in_the_list_and_in_the_live_box(admin, claim):
    job = claim("w1")
    assert "no progress reported" in page_of(admin, job)
    assert report_progress(job.id, Report(0.25, {"phase": "load"}, "loading <rows>"), attempt=1, worker_id="w1")
    html = page_of(admin, job)
    assert "25%" in html and "&quot;phase&quot;: &quot;load&quot;" in html
    assert '<span class="ojs-progress-message">loading &lt;rows&gt;</span>' in html
    listing = admin.get("/admin/django_ojs/job/").content.decode()
    assert '<strong class="ojs-progress-cell">25%</strong>' in listing
    live = admin.get(f"/admin/django_ojs/job/{job.pk}/progress/").json()
    assert live["live"] is True and "25%" in live["html"] and "loading &lt;rows&gt;" in live["html"]
