"""A backend for Django's tasks framework (Django >= 6.0) that stores tasks as OJS jobs.

::

    TASKS = {"default": {"BACKEND": "django_ojs.tasks.OJSBackend"}}

``@task`` functions then enqueue OJS jobs of type ``django.task``;
``manage.py ojs_worker`` runs them (the handler below is registered when
django-ojs starts on Django 6), and ``TaskResult``\\ s are read back from the
job store: ``backend.get_result(id)``, ``result.refresh()``.

Mapping:

- ``TaskResult.id`` is the job id. ``queue_name``, ``priority`` and
  ``run_after`` are the job's queue, priority and ``scheduled_at``.
- Status: a job waiting (scheduled, available, retryable, pending) is
  READY, an active one RUNNING, a completed one SUCCESSFUL, a discarded or
  cancelled one FAILED.
- ``errors``: one ``TaskError`` per failed attempt, from the job's error
  history; ``worker_ids``: the worker of each attempt.
- Retries follow the OJS retry policy: the project's default
  (``OJS["DEFAULT_RETRY"]``), or ``OPTIONS={"RETRY": {"max_attempts": 1}}``
  for Django's own run-once semantics.

Enqueueing goes through ``django_ojs.enqueue``: inside ``transaction.atomic()``
the task commits or rolls back with the caller's rows.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Prefetch
from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from .handlers.context import JobContext
from .handlers.registry import registry
from .models import Job, JobError
from .producer import enqueue
from .protocol.envelope import DJANGO_TASK_TYPE
from .protocol.states import JobState

JOB_TYPE = DJANGO_TASK_TYPE

STATUS = {
    JobState.SCHEDULED: TaskResultStatus.READY,
    JobState.AVAILABLE: TaskResultStatus.READY,
    JobState.PENDING: TaskResultStatus.READY,
    JobState.RETRYABLE: TaskResultStatus.READY,
    JobState.ACTIVE: TaskResultStatus.RUNNING,
    JobState.COMPLETED: TaskResultStatus.SUCCESSFUL,
    JobState.DISCARDED: TaskResultStatus.FAILED,
    JobState.CANCELLED: TaskResultStatus.FAILED,
}


class OJSBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True  # Task.call runs coroutines with async_to_sync
    supports_get_result = True
    supports_priority = True

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        options: dict[str, Any] = {"queue": task.queue_name, "priority": task.priority}
        if task.run_after is not None:
            options["scheduled_at"] = task.run_after
        if "RETRY" in self.options:
            options["retry"] = self.options["RETRY"]
        call = {
            "task": task.module_path,
            "backend": self.alias,
            "args": normalize_json(list(args)),
            "kwargs": normalize_json(dict(kwargs)),
        }
        job = enqueue(JOB_TYPE, [call], **options)
        if job is None:
            raise InvalidTask("the OJS enqueue middleware dropped this task")
        result = task_result(job, [], task=task)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        try:
            job_id = uuid.UUID(str(result_id))
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        job = (
            Job.objects.filter(id=job_id, type=JOB_TYPE)
            .prefetch_related(Prefetch("errors", queryset=JobError.objects.order_by("attempt", "id")))
            .first()
        )
        if job is None:
            raise TaskResultDoesNotExist(result_id)
        return task_result(job, list(job.errors.all()))


def task_result(job: Any, errors: list[Any], *, task: Task | None = None) -> TaskResult:
    """A ``TaskResult`` from a ``django.task`` job and its error history."""
    call = job.args[0]
    task = task or load_task(call["task"])
    status = STATUS[JobState(job.state)]
    owners = {error.attempt: (error.details or {}).get("worker_id", "") for error in errors}
    if job.attempt and job.worker_id:
        owners.setdefault(job.attempt, job.worker_id)
    result = TaskResult(
        task=task,
        id=str(job.id),
        status=status,
        enqueued_at=job.enqueued_at or job.created_at,
        started_at=job.started_at,
        last_attempted_at=job.started_at,
        finished_at=job.finished_at,
        args=call["args"],
        kwargs=call["kwargs"],
        backend=call.get("backend", task.backend),
        errors=[task_error(error) for error in errors],
        worker_ids=[owners.get(attempt, "") for attempt in range(1, job.attempt + 1)],
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.result)
    return result


def task_error(error: Any) -> TaskError:
    details = error.details or {}
    lines = [*(error.backtrace or []), f"{error.type}: {error.message}"]
    return TaskError(exception_class_path=details.get("error_class", error.type), traceback="\n".join(lines))


def load_task(path: str) -> Task:
    try:
        task = import_string(path)
    except ImportError as exc:
        raise InvalidTask(f"cannot import task {path!r}: {exc}") from exc
    if not isinstance(task, Task):
        raise InvalidTask(f"{path!r} is not a Task (decorate the function with @task)")
    return task


def run_task(ctx: JobContext, call: dict[str, Any]) -> Any:
    """The OJS handler of ``django.task`` jobs: run the task, return its JSON result."""
    task = load_task(call["task"])
    result = task_result(ctx.job, [], task=task)
    object.__setattr__(result, "status", TaskResultStatus.RUNNING)
    task_started.send(type(task.get_backend()), task_result=result)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *call["args"], **call["kwargs"])
        else:
            value = task.call(*call["args"], **call["kwargs"])
        value = normalize_json(value)
    except BaseException:
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        task_finished.send(type(task.get_backend()), task_result=result)
        raise
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "_return_value", value)
    task_finished.send(type(task.get_backend()), task_result=result)
    return value


registry.register(JOB_TYPE, run_task)
