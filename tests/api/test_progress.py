"""PUT/GET /ojs/v1/jobs/{id}/progress (ojs-progress §6-§8): a report is a heartbeat on its lease."""

from __future__ import annotations

import pytest

from django_ojs.core.types import Lease
from django_ojs.models import Event, Job
from django_ojs.protocol.failure import Failure
from tests.helpers import reload, update

pytestmark = pytest.mark.django_db


def url(job) -> str:
    return f"/ojs/v1/jobs/{job.id}/progress"


def test_no_progress_yet_reads_nulls_not_404(api, push):
    job = push()
    body = api.get(url(job)).json()
    assert (body["job_id"], body["state"], body["progress"], body["data"]) == (str(job.id), "available", None, None)


def test_an_unknown_job_is_404(api):
    assert api.get("/ojs/v1/jobs/019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f/progress").status_code == 404


def test_a_report_is_stored_clamped_monotonic_and_extends_the_lease(make_client, claim):
    worker = make_client("worker")
    job = claim("w1")
    update(job, lease_expires_at=job.started_at)
    response = worker.put(url(job), {"progress": 1.7, "data": {"rows": 5}, "attempt": 1, "worker_id": "w1"})
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] is True
    assert response["X-OJS-Progress"] == "1.0"
    stored = reload(job)
    assert stored.lease_expires_at > job.started_at  # §6.3: a heartbeat
    worker.put(url(job), {"progress": 0.2})
    assert worker.get(url(job)).json()["progress"] == 1.0
    assert Event.objects.filter(type="job.progress", job_id=job.id).count() >= 1


def test_reports_on_another_lease_or_state_are_ignored_not_rejected(make_client, claim, push):
    worker = make_client("worker")
    job = claim("w1")
    assert worker.put(url(job), {"progress": 0.5, "attempt": 2}).json()["accepted"] is False
    assert worker.put(url(job), {"progress": 0.5, "worker_id": "w2"}).json()["accepted"] is False
    waiting = push()
    response = worker.put(url(waiting), {"progress": 0.5})
    assert (response.status_code, response.json()["accepted"]) == (200, False)
    assert reload(job).progress is None and reload(waiting).progress is None


def test_progress_is_one_on_completion_and_kept_on_failure(make_client, claim):
    worker = make_client("worker")
    done, failed = claim("w1"), claim("w1", options={"retry": {"max_attempts": 1}})
    for job in (done, failed):
        worker.put(url(job), {"progress": 0.4, "data": {"step": 2}})
    Job.objects.ack(done.id, lease=Lease(worker_id="w1"))
    Job.objects.fail(failed.id, Failure(type="Boom", message="x"), lease=Lease(worker_id="w1"))
    assert worker.get(url(done)).json()["progress"] == 1.0
    assert worker.get(url(failed)).json()[["progress", "data"][0]] == 0.4
    assert worker.get(url(failed)).json()["data"] == {"step": 2}


@pytest.mark.parametrize("body", [{"progress": "x"}, {}, {"progress": 0.1, "attempt": 0}, {"progress": 0.1, "worker_id": 3}])
def test_bad_reports_are_400_and_change_nothing(make_client, claim, body):
    worker = make_client("worker")
    job = claim("w1")
    response = worker.put(url(job), body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert reload(job).progress is None


def test_reporting_needs_the_worker_scope(make_client, claim):
    job = claim("w1")
    assert make_client("read").put(url(job), {"progress": 0.5}).status_code == 403
