"""Sidebar filters whose choices cost no table scan.

Django's ``AllValuesFieldListFilter`` lists choices with ``SELECT DISTINCT``
over the whole table, a full scan of a million jobs on every page view. Each
filter here finds its choices another way: queues from the queue table,
types by a loose scan of the ``ojs_job_type`` index (one probe per distinct
type), priorities and error types from a bounded sample of recent jobs. A
value chosen elsewhere (a link from the queue or worker page) is always
offered, so the sidebar shows what the list is filtered by.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet, Value
from django.db.models.fields.json import KT
from django.http import HttpRequest

from ..core.clock import TxNow
from ..core.django_tasks import recent_tasks, task_condition
from ..core.selection import type_condition
from ..core.stats import job_types
from ..models import Job, Queue
from ..protocol.states import STATE_ORDER, JobState

CHOICE_LIMIT = 200
# Recent jobs sampled for choices no index lists (priorities, error types).
SAMPLE_SIZE = 5_000


class ValueFilter(admin.SimpleListFilter):
    """Filter on one column by exact value; subclasses say where the choices come from."""

    field: str

    def choices_from_store(self) -> list[Any]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        values = [str(value) for value in self.choices_from_store() if value is not None]
        current = self.value()
        if current and current not in values:
            values.append(current)
        return [(value, value) for value in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(**{self.field: value}) if value else queryset


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(state.value, state.value) for state in STATE_ORDER]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(state=self.value()) if self.value() else queryset


class QueueFilter(ValueFilter):
    title = "queue"
    parameter_name = field = "queue"

    def choices_from_store(self) -> list[Any]:
        return list(Queue.objects.order_by("name").values_list("name", flat=True)[:CHOICE_LIMIT])


class TypeFilter(ValueFilter):
    title = "type"
    parameter_name = field = "type"

    def choices_from_store(self) -> list[Any]:
        return known_types()

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        # A type ending in "*" is a prefix ("email.*"), as the admin API and manage.py ojs take it.
        value = self.value()
        return queryset.filter(type_condition([value])) if value else queryset


class TaskFilter(ValueFilter):
    """The Django @task function a ``django.task`` job runs (core/django_tasks.py); shown once such jobs exist."""

    title = "task"
    parameter_name = field = "task"

    def choices_from_store(self) -> list[Any]:
        return recent_tasks(SAMPLE_SIZE)[:CHOICE_LIMIT]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(task_condition([value])) if value else queryset


class PriorityFilter(ValueFilter):
    title = "priority"
    parameter_name = field = "priority"

    def choices_from_store(self) -> list[Any]:
        recent = Job.objects.order_by("-seq").values_list("priority", flat=True)[:SAMPLE_SIZE]
        return sorted(set(recent), reverse=True)

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value is None:
            return queryset
        try:
            return queryset.filter(priority=int(value))
        except ValueError:
            return queryset.none()


class WorkerFilter(ValueFilter):
    """Jobs reserved by one worker: reached from the worker page's active-job links."""

    title = "reserved by worker"
    parameter_name = field = "worker_id"

    def choices_from_store(self) -> list[Any]:
        return []


class FinishedWithinFilter(admin.SimpleListFilter):
    """Jobs that finished within the last hour or day, by the database clock: reached from the
    overview's "discarded in the last hour" (the index of finished jobs serves it). Shown only
    while chosen, as the worker filter is."""

    title = "finished within"
    parameter_name = "finished_within"
    WINDOWS = {"1h": ("the last hour", dt.timedelta(hours=1)), "1d": ("the last day", dt.timedelta(days=1))}

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        chosen = self.value()
        return [(chosen, self.WINDOWS[chosen][0])] if chosen in self.WINDOWS else []

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        window = self.WINDOWS.get(self.value() or "")
        if window is None:
            return queryset
        return queryset.filter(finished_at__gte=TxNow() - Value(window[1]))


class WaitFilter(admin.SimpleListFilter):
    """Jobs parked by their handler waiting for a signal (docs/how-to/snooze-signals-timers.md),
    and jobs that snoozed at least once."""

    title = "snooze and signals"
    parameter_name = "waiting"
    CHOICES = {"signal": "waiting for a signal", "snoozed": "snoozed"}

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return list(self.CHOICES.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "signal":
            # INFO's ``waiting``: parked, so scheduled; waiting_for outlives a timeout's promotion.
            return queryset.filter(state=JobState.SCHEDULED, waiting_for__isnull=False)
        if self.value() == "snoozed":
            return queryset.filter(snoozes__gt=0)
        return queryset


class ErrorTypeFilter(ValueFilter):
    """The last error's type, for "retry everything that failed with X" (ojs-dead-letter §9.1)."""

    title = "last error type"
    parameter_name = "error_type"
    field = "error__type"

    def choices_from_store(self) -> list[Any]:
        recent = (
            Job.objects.filter(state=JobState.DISCARDED)
            .order_by("-finished_at")
            .annotate(error_type=KT("error__type"))
            .values_list("error_type", flat=True)[:SAMPLE_SIZE]
        )
        return sorted(set(recent) - {None})


class RetentionFilter(admin.SimpleListFilter):
    """What a discarded job is kept as: a dead letter (the dead letter's retention) or discarded (pruned sooner)."""

    title = "kept as"
    parameter_name = "kept"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("dead_letter", "dead letter"), ("discarded", "discarded")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("dead_letter", "discarded"):
            return queryset.filter(dead_letter=self.value() == "dead_letter")
        return queryset


def known_types(limit: int = CHOICE_LIMIT) -> list[str]:
    """Every distinct job type, by a loose index scan (``core.stats.job_types``)."""
    return job_types(limit)
