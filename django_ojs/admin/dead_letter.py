"""The dead letter: discarded jobs with their last error; retry or purge (ojs-dead-letter).

Listed by discard time, newest first, straight from the ``ojs_job_finished``
index. Retry puts a job back to ``available`` with fresh attempts and its
error history kept (§6.1); purge deletes it and its history, after asking.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.safestring import SafeString

from ..models import DeadLetterJob, Job
from ..protocol.states import JobState
from .display import moment
from .filters import ErrorTypeFilter, QueueFilter, RetentionFilter, TypeFilter
from .job_moves import PURGE, RETRY
from .jobs import JobAdminBase


@admin.register(DeadLetterJob)
class DeadLetterJobAdmin(JobAdminBase):
    list_title = "Dead letter"
    job_moves = (RETRY, PURGE)
    missing_reason = "no longer in the dead letter"
    list_display = ("type_and_id", "queue_name", "attempts", "discarded", "kept_as", "last_error")
    list_filter = (QueueFilter, TypeFilter, ErrorTypeFilter, RetentionFilter)
    ordering = ("-finished_at", "-seq")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(state=JobState.DISCARDED)

    @admin.display(description="discarded")
    def discarded(self, job: Job) -> SafeString | str:
        return moment(job.finished_at, job.db_now)

    @admin.display(description="kept as")
    def kept_as(self, job: Job) -> SafeString | str:
        return "dead letter" if job.dead_letter else "discard"

    def url_after_move(self, job: Job, move: str) -> str:
        # A retried job leaves the dead letter: follow it to the Jobs page.
        # A purged one is gone: back to the list.
        if move == RETRY.name:
            return reverse("admin:django_ojs_job_change", args=[job.pk])
        return reverse("admin:django_ojs_deadletterjob_changelist")
