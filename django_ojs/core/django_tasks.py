"""Jobs of Django's ``@task`` functions: one OJS type, told apart by the task each runs.

``django_ojs.tasks`` enqueues every ``@task`` call as a job of type ``django.task``,
its one argument naming the task by its dotted path (``args[0]["task"]``): the type
routes the job to the one handler that runs any task, the task says which. The OJS
surfaces keep the type as OJS defines it (the HTTP job record, events, the metrics'
``type`` label); the operators' job lists -- the admin's Jobs and Failed jobs,
``manage.py ojs jobs``, the admin API's job list -- show the task beside it and filter
by it (``task``), each with these expressions.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Case, CharField, Q, Value, When
from django.db.models.fields.json import KT

from ..models import Job
from ..protocol.envelope import DJANGO_TASK_TYPE

__all__ = ["DJANGO_TASK_TYPE", "recent_tasks", "task_column", "task_condition"]


def task_column() -> Case:
    """The task a job runs, as a column: its dotted path for a ``django.task`` job, else NULL."""
    return Case(When(type=DJANGO_TASK_TYPE, then=KT("args__0__task")), default=Value(None), output_field=CharField())


def task_condition(tasks: Sequence[str]) -> Q:
    """The ``django.task`` jobs running one of ``tasks`` (dotted paths): read through the type's index."""
    return Q(type=DJANGO_TASK_TYPE, args__0__task__in=list(tasks))


def recent_tasks(sample: int) -> list[str]:
    """The tasks among the last ``sample`` ``django.task`` jobs, by name: a filter's choices without a scan."""
    recent = (
        Job.objects.filter(type=DJANGO_TASK_TYPE).order_by("-seq").values_list(KT("args__0__task"), flat=True)[:sample]
    )
    return sorted({task for task in recent if task})
