"""Django's tasks framework on OJS: @task functions enqueue jobs, ojs_worker runs them."""

from __future__ import annotations

import datetime as dt

import django
import pytest

from .conftest import PATIENCE, wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(django.VERSION < (6, 0), reason="django.tasks exists from Django 6.0 on"),
]


def finished(result):
    def check():
        result.refresh()
        return result.is_finished

    return check


def test_tasks_run_on_the_worker_and_report_back(worker):
    from django.db import transaction
    from django.tasks import TaskResultStatus, default_task_backend
    from django.utils import timezone

    from django_ojs.models import Job

    from .probe import tasks

    with transaction.atomic():
        summed = tasks.add.enqueue(2, 3)
    failed = tasks.fail.enqueue("no luck")
    contextual = tasks.which_attempt.enqueue(label="ctx")
    later = tasks.add.using(run_after=timezone.now() + dt.timedelta(hours=1)).enqueue(1, 1)
    assert summed.status == TaskResultStatus.READY
    assert Job.objects.get(id=later.id).state == "scheduled"

    worker()
    for result in (summed, failed, contextual):
        wait_until(finished(result), PATIENCE, f"task {result.task.name} to finish")

    assert summed.status == TaskResultStatus.SUCCESSFUL and summed.return_value == 5
    assert summed.attempts == 1 and summed.worker_ids[0]
    assert contextual.return_value == {"label": "ctx", "attempt": 1}
    assert failed.status == TaskResultStatus.FAILED
    [error] = failed.errors
    assert error.exception_class_path == "tests.worker.probe.tasks.TaskFailure"
    assert error.exception_class is tasks.TaskFailure and "no luck" in error.traceback

    fetched = default_task_backend.get_result(summed.id)
    assert (fetched.status, fetched.args, fetched.return_value) == (TaskResultStatus.SUCCESSFUL, [2, 3], 5)
    assert tasks.add.get_result(summed.id).id == summed.id
    assert default_task_backend.get_result(later.id).status == TaskResultStatus.READY

    # Which task each job runs, as the operators' job lists say it (tests/test_task_jobs_agree.py).
    from django_ojs.cli.reads import list_jobs
    from django_ojs.core.selection import JobFilter

    listed = {row["id"]: (row["type"], row["task"]) for row in list_jobs(JobFilter(), 10)}
    assert listed[str(summed.id)] == ("django.task", "tests.worker.probe.tasks.add")
    assert listed[str(failed.id)] == ("django.task", "tests.worker.probe.tasks.fail")


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_leaves_no_task():
    from django.db import transaction
    from django.tasks.exceptions import TaskResultDoesNotExist

    from .probe import tasks

    with pytest.raises(RuntimeError), transaction.atomic():
        result = tasks.add.enqueue(1, 2)
        raise RuntimeError
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)
