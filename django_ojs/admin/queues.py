"""Queues: counts by state, throughput, the oldest waiting job, the time to drain, limits, bound and
fairness; pause/resume, configure.

Each count links to the Jobs list filtered by that queue and state. The
figures for all queues on the page come from one bounded statement plus the
throughput queries (``stats``), attached to the rows once per page view.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..core import limits
from ..core import queues as queue_moves
from ..core.clock import db_now
from ..core.queue_config import describe_bound, describe_limits
from ..core.stats import THROUGHPUT_WINDOW, queue_figures
from ..models import Queue
from ..protocol.ratelimit import queue_key
from ..protocol.states import JobState
from .base import ConsoleAdmin
from .display import EMPTY, admin_changelist_url, breakable, human_duration, timestamp
from .outcome import Outcome, note_missing
from .queue_config import QueueConfigForm

_WINDOW_MINUTES = int(THROUGHPUT_WINDOW.total_seconds() // 60)


def _count_column(state: JobState) -> Any:
    def column(self: QueueAdmin, queue: Queue) -> SafeString | str:
        tally = queue.figures.counts[state.value]
        if tally.value == 0:
            return format_html('<span class="ojs-quiet">{}</span>', 0)
        url = admin_changelist_url("job", queue=queue.name, state=state.value)
        return format_html('<a href="{}">{}</a>', url, str(tally))

    return admin.display(description=state.value)(column)


@admin.register(Queue)
class QueueAdmin(ConsoleAdmin):
    # What fits 1280 px: the queue with its status, the states that say whether
    # it keeps up (waiting, running, coming back, failed for good), its
    # throughput, the oldest waiting job and its limits with its bound. Every
    # state's count, completed, pending and cancelled too, is on the Jobs list
    # (filter by queue and state).
    list_display = (
        "queue_name", "available", "active", "scheduled", "retryable", "discarded",
        "completed_rate", "failed_rate", "oldest_waiting", "limits",
    )
    list_display_links = None
    list_title = "Queues"
    search_fields = ("name",)
    ordering = ("name",)
    sortable_by = ()
    list_per_page = 100
    fields = ("name", "paused", "paused_at", "created_at", "limits", "bound")
    readonly_fields = fields
    actions = ("pause_queues", "resume_queues")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A queue exists once a job is pushed to it.
        return False

    def get_urls(self) -> list[Any]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_configure"
        view = path("<path:name>/configure/", self.admin_site.admin_view(self.configure_view), name=name)
        return [view, *super().get_urls()]

    def configure_view(self, request: HttpRequest, name: str) -> HttpResponse:
        """The queue's limits and bound, shown and (with the change permission) edited."""
        # admin_view only asks for staff: reading the configuration needs the Queues page's view permission.
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        queue = Queue.objects.filter(name=name).first()
        if queue is None:
            raise Http404("no such queue")
        can_change = self.has_change_permission(request)
        if request.method == "POST" and not can_change:
            raise PermissionDenied
        form = QueueConfigForm.for_queue(queue, request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            try:
                saved = form.save(name)
            except forms.ValidationError as exc:
                form.add_error(None, exc)
            else:
                self.log_change(request, saved, "Configuration changed in the admin")
                messages.success(request, f"Configure {name}: done.")
                return HttpResponseRedirect(reverse("admin:django_ojs_queue_changelist"))
        usage = limits.inspect(queue_key(name))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Configure queue {name}",
            "queue": queue,
            "form": form,
            "can_change": can_change,
            "read_only": not can_change,
            "usage": usage,
        }
        return TemplateResponse(request, "admin/django_ojs/queue/configure.html", context)

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        changelist = super().get_changelist_instance(request)
        queues = list(changelist.result_list)
        now = db_now()
        figures = queue_figures([queue.name for queue in queues], now)
        for queue in queues:
            queue.figures, queue.now = figures[queue.name], now
        changelist.result_list = queues
        return changelist

    @admin.display(description="queue", ordering="name")
    def queue_name(self, queue: Queue) -> SafeString:
        return format_html(
            '<a href="{}"><strong>{}</strong></a><br>{}',
            admin_changelist_url("job", queue=queue.name), breakable(queue.name), self.status(queue),
        )

    @admin.display(description="status")
    def status(self, queue: Queue) -> SafeString:
        if queue.paused:
            since = f"since {timestamp(queue.paused_at)}" if queue.paused_at else "since an unknown time"
            return format_html('<span class="ojs-paused" title="paused {}">paused</span>', since)
        return format_html('<span class="ojs-running">{}</span>', "running")

    available = _count_column(JobState.AVAILABLE)
    active = _count_column(JobState.ACTIVE)
    scheduled = _count_column(JobState.SCHEDULED)
    retryable = _count_column(JobState.RETRYABLE)
    pending = _count_column(JobState.PENDING)
    completed = _count_column(JobState.COMPLETED)
    discarded = _count_column(JobState.DISCARDED)
    cancelled = _count_column(JobState.CANCELLED)

    @admin.display(description=f"done / min ({_WINDOW_MINUTES} min)")
    def completed_rate(self, queue: Queue) -> str:
        return _rate(queue.figures.completed_per_minute)

    @admin.display(description=f"failed / min ({_WINDOW_MINUTES} min)")
    def failed_rate(self, queue: Queue) -> SafeString | str:
        rate = queue.figures.failed_per_minute
        return format_html('<span class="ojs-alarm">{}</span>', _rate(rate)) if rate else _rate(rate)

    @admin.display(description="oldest waiting")
    def oldest_waiting(self, queue: Queue) -> SafeString | str:
        # The two autoscaling signals in one cell, so the list keeps to 1280 px: how long the head
        # has waited, and under it how long the backlog takes to drain.
        at = queue.figures.oldest_available_at
        if at is None:
            return EMPTY
        waited = human_duration(queue.now - at)
        shown = waited if queue.figures.oldest_exact else f"≥ {waited}"
        return format_html('{}<br><span class="ojs-drain">{}</span>', shown, self.drain_time(queue))

    @admin.display(description="drains in")
    def drain_time(self, queue: Queue) -> SafeString | str:
        # The API's estimated_drain_seconds and the metric ojs_queue_drain_seconds.
        seconds = queue.figures.estimated_drain_seconds
        if seconds is None and queue.figures.paused:
            return format_html('<span title="{}">{}</span>', "a paused queue hands out no job", "does not drain: paused")
        if seconds is None:
            return format_html('<span title="{}">{}</span>', "jobs wait and none finished in the last "
                               f"{_WINDOW_MINUTES} minutes: no rate to estimate from", "no rate")
        if seconds == 0:
            return EMPTY
        return f"drains in {human_duration(dt.timedelta(seconds=seconds))}"

    @admin.display(description="limits and bound")
    def limits(self, queue: Queue) -> SafeString:
        url = reverse("admin:django_ojs_queue_configure", args=[queue.name])
        active = queue.figures.counts[JobState.ACTIVE.value]
        return format_html('<a href="{}" title="configure">{}</a>', url, describe_limits(queue, active))

    @admin.display(description="max size")
    def bound(self, queue: Queue) -> str:
        return EMPTY if queue.max_size is None else describe_bound(queue)

    # -- actions ------------------------------------------------------------------------

    @admin.action(description="Pause selected queues (workers stop fetching from them)", permissions=["change"])
    def pause_queues(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_paused(request, queryset, pause=True)

    @admin.action(description="Resume selected queues", permissions=["change"])
    def resume_queues(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_paused(request, queryset, pause=False)

    def _set_paused(self, request: HttpRequest, queryset: QuerySet, *, pause: bool) -> None:
        outcome = Outcome("Pause" if pause else "Resume")
        queues = list(queryset)
        note_missing(request, len(queues), outcome, "no longer exists")
        for queue in queues:
            if queue.paused == pause:
                outcome.skip("already paused" if pause else "not paused")
                continue
            changed = queue_moves.pause(queue.name) if pause else queue_moves.resume(queue.name)
            outcome.done_objects.append(changed)
        outcome.send(request)


def _rate(per_minute: float) -> str:
    if per_minute == 0:
        return "0"
    return f"{per_minute:,.1f}" if per_minute < 100 else f"{per_minute:,.0f}"
