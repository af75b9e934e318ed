"""The Workflows pages: the list, the picture of the steps, cancel and retry-from-failed-step."""

from __future__ import annotations

import pytest
from django.urls import reverse

from django_ojs.core import workflows as store
from django_ojs.core.types import Lease
from django_ojs.models import Job, Workflow
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.workflows import parse

pytestmark = pytest.mark.django_db


def failed_chain() -> Workflow:
    workflow = store.create(parse({"type": "chain", "name": "import", "steps": [
        {"type": "fetch.url", "args": ["u"], "options": {"queue": "wf"}},
        {"type": "parse.doc", "args": [], "options": {"queue": "wf", "retry": {"max_attempts": 1}}},
        {"type": "store.doc", "args": [], "options": {"queue": "wf"}},
    ]}, max_jobs=10, job_options=store.job_options()))
    first = Job.objects.fetch(["wf"], worker_id="w")[0]
    Job.objects.ack(first.id, result={"bytes": 42}, lease=Lease("w"))
    second = Job.objects.fetch(["wf"], worker_id="w")[0]
    Job.objects.fail(second.id, Failure(type="ParseError", message="bad <html>", retryable=False), lease=Lease("w"))
    return workflow


def test_the_workflow_page_draws_each_step_with_its_state_result_and_error(admin_client):
    workflow = failed_chain()
    listing = admin_client.get(reverse("admin:django_ojs_workflow_changelist")).content.decode()
    assert "import" in listing and "1 / 3, 1 failed" in listing
    page = admin_client.get(reverse("admin:django_ojs_workflow_change", args=[workflow.pk])).content.decode()
    assert page.count("ojs-wf-job ") == 3
    assert "result: <code>{&quot;bytes&quot;: 42}</code>" in page
    assert "<code>ParseError</code> bad &lt;html&gt;" in page  # escaped
    assert page.count("Retry from here") == 1
    job = Job.objects.get(type="parse.doc")
    assert reverse("admin:django_ojs_job_change", args=[job.seq]) in page
    # The job's page links back to its workflow.
    job_page = admin_client.get(reverse("admin:django_ojs_job_change", args=[job.seq])).content.decode()
    assert reverse("admin:django_ojs_workflow_change", args=[workflow.pk]) in job_page


def test_retry_from_the_failed_step_and_cancel_go_through_the_core(admin_client):
    workflow = failed_chain()
    retry = reverse("admin:django_ojs_workflow_retry", args=[workflow.pk, "1"])
    assert admin_client.get(retry).status_code == 405
    admin_client.post(retry)
    assert Workflow.objects.get(pk=workflow.pk).state == "running"
    assert Job.objects.filter(type="parse.doc", state="available").count() == 1
    admin_client.post(reverse("admin:django_ojs_workflow_cancel", args=[workflow.pk]))
    assert Workflow.objects.get(pk=workflow.pk).state == "cancelled"
    assert not Job.objects.filter(state="available").exists()
    said = admin_client.post(reverse("admin:django_ojs_workflow_cancel", args=[workflow.pk]), follow=True)
    assert "Not cancelled" in said.content.decode()


def test_a_viewer_without_change_permission_gets_no_buttons(client, django_user_model):
    from django.contrib.auth.models import Permission

    workflow = failed_chain()
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_workflow"))
    client.force_login(viewer)
    page = client.get(reverse("admin:django_ojs_workflow_change", args=[workflow.pk])).content.decode()
    assert "Retry from here" not in page
    assert client.post(reverse("admin:django_ojs_workflow_retry", args=[workflow.pk, "1"])).status_code == 403


def test_the_workflow_page_shows_the_progress_the_http_api_serves(admin_client, api):
    workflow = store.create(parse({"type": "chain", "steps": [
        {"type": "etl.extract", "args": [], "options": {"queue": "wf"}},
        {"type": "etl.transform", "args": [], "options": {"queue": "wf"}},
        {"type": "etl.load", "args": [], "options": {"queue": "wf"}},
    ]}, max_jobs=10, job_options=store.job_options()))
    first = Job.objects.fetch(["wf"], worker_id="w")[0]
    Job.objects.ack(first.id, lease=Lease("w"))
    second = Job.objects.fetch(["wf"], worker_id="w")[0]
    api.put(f"/ojs/v1/jobs/{second.id}/progress", {"progress": 0.73})
    served = api.get(f"/ojs/v1/workflows/{workflow.id}/progress").json()["progress"]
    page = admin_client.get(reverse("admin:django_ojs_workflow_change", args=[workflow.pk])).content.decode()
    assert served == 0.5767
    assert '<div class="readonly">57%</div>' in page  # ojs-progress §14.5, floored as every percentage in the console


def test_a_grown_batch_is_counted_alike_by_the_admin_the_cli_and_the_http_api(admin_client, api):
    import io
    import json

    from django.core.management import call_command

    workflow = store.create(parse({"type": "batch", "jobs": [
        {"type": "mail.send", "args": [1], "options": {"queue": "wf"}},
        {"type": "mail.send", "args": [2], "options": {"queue": "wf"}},
    ], "callbacks": {"on_complete": {"type": "mail.report", "args": [], "options": {"queue": "cb"}}}},
        max_jobs=10, job_options=store.job_options()))
    store.add_jobs(workflow.id, {"jobs": [{"type": "mail.send", "args": [3], "options": {"queue": "wf"}}]})
    first, second = Job.objects.fetch(["wf"], worker_id="w", count=2)
    Job.objects.ack(first.id, lease=Lease("w"))
    Job.objects.fail(second.id, Failure(type="Bounce", message="no", retryable=False), lease=Lease("w"))
    expected = {"total": 3, "ended": 2, "share_ended": 2 / 3, "by_state": {"completed": 1, "failed": 1, "pending": 1}}
    assert api.get(f"/ojs/v1/workflows/{workflow.id}").json()["workflow"]["jobs_by_state"] == expected
    out = io.StringIO()
    call_command("ojs", "workflow", str(workflow.id), "--json", stdout=out)
    assert json.loads(out.getvalue())["jobs_by_state"] == expected
    page = admin_client.get(reverse("admin:django_ojs_workflow_change", args=[workflow.pk])).content.decode()
    assert "2 of 3 ended (66%): 1 completed, 1 failed, 1 pending" in page


def test_steps_done_counts_the_steps_the_http_api_counts(admin_client, api):
    """A chain of three steps, the second a group of two, read "2 / 4" in the console
    (every job) where GET /ojs/v1/workflows/{id} said steps_total 3."""
    workflow = store.create(parse({"type": "chain", "name": "fan", "steps": [
        {"type": "fan.split", "args": [], "options": {"queue": "wf"}},
        {"type": "group", "jobs": [{"type": "fan.part", "args": [1], "options": {"queue": "wf"}},
                                   {"type": "fan.part", "args": [2], "options": {"queue": "wf"}}]},
        {"type": "fan.join", "args": [], "options": {"queue": "wf"}},
    ]}, max_jobs=10, job_options=store.job_options()))
    split = Job.objects.fetch(["wf"], worker_id="w")[0]
    Job.objects.ack(split.id, lease=Lease("w"))
    part = Job.objects.fetch(["wf"], worker_id="w")[0]
    Job.objects.ack(part.id, lease=Lease("w"))
    served = api.get(f"/ojs/v1/workflows/{workflow.id}").json()["workflow"]
    assert (served["steps_completed"], served["steps_total"]) == (1, 3)
    listing = admin_client.get(reverse("admin:django_ojs_workflow_changelist")).content.decode()
    assert "1 / 3" in listing
