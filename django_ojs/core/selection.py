"""Which jobs an operator means: the filters the CLI and the admin API take, as one query.

``manage.py ojs`` (``cli/``) and ``/ojs/v1/admin/jobs`` (``api/admin/``) list
jobs and move them in bulk (``core/bulk.py``) by the same filter, so a filter
selects the same jobs whichever door it came through; the admin's type filter
takes its meaning from ``type_condition``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from ..models import Job
from ..protocol.errors import InvalidRequest
from ..protocol.states import JobState
from .dead_letter import DEAD_LETTER, KEPT_AS
from .django_tasks import task_condition
from .search import job_search


@dataclass(frozen=True)
class JobFilter:
    """Each list is OR within, AND across; an empty filter selects every job."""

    states: Sequence[str] = ()
    queues: Sequence[str] = ()
    # An exact type, or a prefix ending in "*" ("email.*").
    types: Sequence[str] = ()
    # The dotted path of a Django @task function: the django.task jobs running it (core/django_tasks.py).
    tasks: Sequence[str] = ()
    ids: Sequence[str] = ()
    # The type of the job's last error (ojs-dead-letter §6.2 ``error_type``).
    error_types: Sequence[str] = ()
    # A search term of the admin's search box (core/search.py).
    search: str = ""
    # Created at or after ``created_since``, before ``created_until`` (ojs-admin-api §7.1 since, until).
    created_since: dt.datetime | None = None
    created_until: dt.datetime | None = None
    # Finished before (ojs-admin-api §6.5 ``older_than``: the terminal timestamp).
    finished_before: dt.datetime | None = None
    # What a discarded job is kept as (core/dead_letter.py): "dead letter" or "discarded";
    # either selects discarded jobs only.
    kept_as: str = ""

    @property
    def empty(self) -> bool:
        return not (
            self.states or self.queues or self.types or self.tasks or self.ids or self.error_types or self.search
            or self.created_since or self.created_until or self.finished_before or self.kept_as
        )

    def selection(self) -> QuerySet:
        """The jobs this filter matches; bad values raise ``InvalidRequest``."""
        rows = Job.objects.all()
        if self.states:
            unknown = sorted(set(self.states) - {state.value for state in JobState})
            if unknown:
                raise InvalidRequest(
                    f"unknown state {', '.join(unknown)} (states: {', '.join(s.value for s in JobState)})",
                    field="state",
                )
            rows = rows.filter(state__in=sorted(set(self.states)))
        if self.queues:
            rows = rows.filter(queue__in=list(self.queues))
        if self.types:
            rows = rows.filter(type_condition(self.types))
        if self.tasks:
            rows = rows.filter(task_condition(self.tasks))
        if self.ids:
            rows = rows.filter(id__in=[job_uuid(value) for value in self.ids])
        if self.error_types:
            rows = rows.filter(error__type__in=list(self.error_types))
        if self.created_since is not None:
            rows = rows.filter(created_at__gte=self.created_since)
        if self.created_until is not None:
            rows = rows.filter(created_at__lt=self.created_until)
        if self.finished_before is not None:
            rows = rows.filter(finished_at__lt=self.finished_before)
        if self.kept_as:
            if self.kept_as not in KEPT_AS:
                raise InvalidRequest(f"kept as must be one of: {', '.join(KEPT_AS)}", field="kept_as")
            rows = rows.filter(state=JobState.DISCARDED, dead_letter=self.kept_as == DEAD_LETTER)
        condition = job_search(self.search) if self.search else None
        return rows.filter(condition) if condition is not None else rows


def type_condition(types: Sequence[str]) -> Q:
    """Exact types (the index ``ojs_job_type``), and a prefix for each ending in "*": what a type
    filter means on every surface (the admin's Jobs and Failed jobs lists filter by it too)."""
    exact = [kind for kind in types if not kind.endswith("*")]
    condition = Q(type__in=exact) if exact else Q()
    for kind in types:
        if kind.endswith("*"):
            condition |= Q(type__startswith=kind[:-1])
    return condition


def job_uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidRequest(f"{value!r} is not a job id (a UUID)", field="id") from None
