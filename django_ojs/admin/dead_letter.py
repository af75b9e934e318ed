"""Failed jobs: every discarded job, what it is kept as and until when; retry or purge.

A discarded job is kept as a **dead letter** (its policy said
``on_exhaustion: "dead_letter"``: ``RETENTION["dead_letter"]``) or
**discarded** (``RETENTION["discarded"]``), core/dead_letter.py. This page
lists both, filterable by that; ``GET /ojs/v1/dead-letter`` and its stats
hold the dead letters only. Listed by discard time, newest first, straight
from the ``ojs_job_finished`` index. Retry puts a job of either kind back to
``available`` with fresh attempts and its error history kept
(ojs-dead-letter §6.1); purge deletes it, its error history and its events,
after asking.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.safestring import SafeString

from ..core.dead_letter import failed_jobs
from ..models import DeadLetterJob, Job
from . import job_pages
from .display import moment
from .filters import ErrorTypeFilter, QueueFilter, RetentionFilter, TaskFilter, TypeFilter
from .job_moves import PURGE, RETRY
from .jobs import JobAdminBase


@admin.register(DeadLetterJob)
class DeadLetterJobAdmin(JobAdminBase):
    list_title = "Failed jobs"
    job_moves = (RETRY, PURGE)
    missing_reason = "no longer discarded"
    list_display = ("type_and_id", "queue_name", "attempts", "discarded", "kept_as", "last_error")
    list_filter = (RetentionFilter, QueueFilter, TypeFilter, TaskFilter, ErrorTypeFilter)
    ordering = ("-finished_at", "-seq")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return failed_jobs(super().get_queryset(request))

    @admin.display(description="discarded")
    def discarded(self, job: Job) -> SafeString | str:
        # The distance alone, the time on hover: room for what the job is kept as beside it.
        return moment(job.finished_at, job.db_now, compact=True)

    @admin.display(description="kept as")
    def kept_as(self, job: Job) -> SafeString | str:
        return job_pages.keeping(job, job.db_now, compact=True)

    def url_after_move(self, job: Job, move: str) -> str:
        # A retried job leaves this page: follow it to the Jobs page.
        # A purged one is gone: back to the list.
        if move == RETRY.name:
            return reverse("admin:django_ojs_job_change", args=[job.pk])
        return reverse("admin:django_ojs_deadletterjob_changelist")
