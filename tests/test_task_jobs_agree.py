"""Which of Django's ``@task`` functions a job runs, on every surface that lists jobs.

Every task is enqueued as a job of the one OJS type ``django.task`` (the handler that runs any
task), its argument naming the task (``args[0]["task"]``, as ``django_ojs.tasks.OJSBackend``
writes it). The admin's job list, its filters, ``manage.py ojs jobs`` and the admin API's job
list showed only the type: every task looked the same. They say the task now, and filter by it,
while the type stays ``django.task`` where OJS defines it (the HTTP job record, the metrics).
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

import django_ojs
from django_ojs.core.django_tasks import DJANGO_TASK_TYPE

pytestmark = pytest.mark.django_db(transaction=True)

RECEIPT, REINDEX = "shop.tasks.send_receipt", "search.tasks.rebuild_index"


def enqueue_task(path: str, *args: object):
    """A job as ``OJSBackend.enqueue`` makes one of a ``@task`` call (Django 6 runs the real one:
    tests/worker/test_django_tasks.py)."""
    return django_ojs.enqueue(DJANGO_TASK_TYPE, [{"task": path, "backend": "default", "args": list(args), "kwargs": {}}])


def ojs_command(*args: str) -> str:
    out = io.StringIO()
    call_command("ojs", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_every_job_list_says_and_filters_by_the_task_a_django_task_job_runs(api, admin_client):
    receipt, reindex = enqueue_task(RECEIPT, 42), enqueue_task(REINDEX)
    plain = django_ojs.enqueue("email.send", ["a@example.com"])

    # The admin's job list: the task in the job's cell, a filter by task, the type's filter unchanged.
    page = admin_client.get(reverse("admin:django_ojs_job_changelist"))
    text = page.content.decode()
    assert RECEIPT in text and REINDEX in text
    assert f"?task={RECEIPT}" in text and f"?task={REINDEX}" in text
    filtered = admin_client.get(reverse("admin:django_ojs_job_changelist"), {"task": RECEIPT})
    assert [job.id for job in filtered.context["cl"].result_list] == [receipt.id]
    by_type = admin_client.get(reverse("admin:django_ojs_job_changelist"), {"type": DJANGO_TASK_TYPE})
    assert {job.id for job in by_type.context["cl"].result_list} == {receipt.id, reindex.id}

    # manage.py ojs jobs: the task beside the type, and the same filter.
    rows = json.loads(ojs_command("jobs", "--json"))
    assert {row["id"]: (row["type"], row["task"]) for row in rows} == {
        str(receipt.id): (DJANGO_TASK_TYPE, RECEIPT), str(reindex.id): (DJANGO_TASK_TYPE, REINDEX),
        str(plain.id): ("email.send", None),
    }
    assert [row["id"] for row in json.loads(ojs_command("jobs", "--json", "--task", RECEIPT))] == [str(receipt.id)]
    table = ojs_command("jobs")
    assert "TASK" in table.splitlines()[0] and RECEIPT in table and REINDEX in table

    # The admin API's job list: the same field and filter.
    items = api.get("/ojs/v1/admin/jobs").json()["items"]
    assert {item["id"]: item.get("task") for item in items} == {
        str(receipt.id): RECEIPT, str(reindex.id): REINDEX, str(plain.id): None,
    }
    only = api.get(f"/ojs/v1/admin/jobs?task={RECEIPT}").json()["items"]
    assert [item["id"] for item in only] == [str(receipt.id)]

    # The job record of the OJS binding keeps the OJS type; its argument names the task.
    record = api.get(f"/ojs/v1/jobs/{receipt.id}").json()["job"]
    assert (record["type"], record["args"][0]["task"]) == (DJANGO_TASK_TYPE, RECEIPT)
