"""The overview: the first screen at 3 a.m. What needs attention, jobs per state,
completed and failed over the last hour, day or month, and the live workers.

Registered on the ``Overview`` proxy model only so that the admin index links
to it; it lists no rows. Anyone who may view jobs may view it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import label_for_field
from django.core.exceptions import PermissionDenied
from django.db.models import Value
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.cache import never_cache

from ..conf import ojs_settings
from ..core import history, maintenance_mode
from ..core.clock import TxNow, db_now
from ..core.counting import count_rows
from ..core.stats import state_counts
from ..models import Job, Overview, Queue, Worker
from ..protocol.states import JobState
from .chart import DAYS, HOURS, MINUTES, Series, Slots, bars
from .display import admin_changelist_url, human_duration, moment
from .workers import LIVE_FIELDS, LIVE_REFRESH_SECONDS, is_dead, with_live_facts


@dataclass(frozen=True)
class ChartWindow:
    label: str
    title: str
    period: str  # of the statistics history (core/history.PERIODS)
    slots: int
    scale: Slots


CHARTS = {
    "hour": ChartWindow("last hour", "Completed and failed per minute, last hour", "1m", 60, MINUTES),
    "day": ChartWindow("last day", "Completed and failed per hour, last day", "1h", 24, HOURS),
    "month": ChartWindow("last 30 days", "Completed and failed per day, last 30 days", "1d", 30, DAYS),
}

# A scheduled or retryable job this late means no reaper is promoting jobs.
OVERDUE_AFTER = dt.timedelta(minutes=1)
WORKER_ROWS = 50


@admin.register(Overview)
class OverviewAdmin(admin.ModelAdmin):
    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(never_cache(self.overview_view))
        return [path("", view, name="django_ojs_overview_changelist")]

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("django_ojs.view_job") or request.user.has_perm("django_ojs.change_job")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def overview_view(self, request: HttpRequest) -> TemplateResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        now = db_now()
        counts = state_counts()
        maintenance = maintenance_mode.current(fresh=True)
        context = {
            **self.admin_site.each_context(request),
            "title": "Overview",
            "opts": self.opts,
            "now": now,
            "as_of": moment(now, now),
            "states": [
                {"state": state, "tally": tally, "url": admin_changelist_url("job", state=state)}
                for state, tally in counts.items()
            ],
            **self._chart(request, now),
            "maintenance": maintenance,
            "maintenance_since": moment(maintenance.enabled_at, now),
            "maintenance_end": moment(maintenance.estimated_end, now),
            "attention": self._attention(request, now),
            "workers": self._workers(request, now),
            "live_url": reverse("admin:django_ojs_worker_live"),
            "live_seconds": LIVE_REFRESH_SECONDS,
        }
        return TemplateResponse(request, "admin/django_ojs/overview.html", context)

    def _chart(self, request: HttpRequest, now: dt.datetime) -> dict[str, Any]:
        """Completed and failed jobs over the last hour, day or month (``?chart=``), from the statistics
        history: what GET /ojs/v1/admin/stats/history answers."""
        name = request.GET.get("chart", "")
        if name not in CHARTS:
            name = "hour"
        window = CHARTS[name]
        found = history.latest(window.period, window.slots, now)
        chart = bars(
            found.slots,
            [
                Series("completed", "ojs-bar-completed", found.values["completed"]),
                Series("failed (discarded)", "ojs-bar-failed", found.values["discarded"]),
            ],
            window.scale,
        )
        if found.counted_through is None:
            note = "The statistics history begins when ojs_reaper first runs; no reaper has run yet."
        elif not found.live:
            note = (f"The statistics history is counted up to {found.counted_through:%Y-%m-%d %H:%M} UTC only: "
                    "is ojs_reaper running?")
        elif any(None in values for values in found.values.values()):
            note = "Hatched slots are before the history began or past its retention (OJS['RETENTION'])."
        else:
            note = ""
        return {
            "chart": chart,
            "chart_title": window.title,
            "chart_note": note,
            "chart_choices": [(key, choice.label, f"?chart={key}", key == name) for key, choice in CHARTS.items()],
        }

    def _workers(self, request: HttpRequest, now: dt.datetime) -> dict[str, Any] | None:
        """The workers table, its cells rendered by the Workers page's own methods."""
        worker_admin = self.admin_site._registry.get(Worker)
        if worker_admin is None or not worker_admin.has_view_permission(request):
            return None
        live = Worker.objects.filter(declared_dead_at__isnull=True)
        workers = list(with_live_facts(live, Value(now)).order_by("hostname", "pid", "id")[:WORKER_ROWS])
        columns = ("worker", "hostname", "queue_list", *LIVE_FIELDS)
        labels = [label_for_field(name, Worker, worker_admin) for name in columns]
        rows = [
            [(name, getattr(worker_admin, name)(worker) if hasattr(worker_admin, name) else getattr(worker, name))
             for name in columns]
            for worker in workers
        ]
        return {"labels": labels, "rows": rows, "total": live.count(), "shown": len(workers)}

    def _attention(self, request: HttpRequest, now: dt.datetime) -> list[dict[str, str]]:
        """Signs that something is wrong, each with where to look."""
        notes = []
        # Workers the reaper has declared dead are handled; silent ones it has not are the alarm.
        unreaped = Worker.objects.filter(declared_dead_at__isnull=True).annotate(db_now=TxNow())
        dead = [w for w in unreaped if is_dead(w, w.db_now)]
        if dead:
            notes.append(
                {
                    "text": f"{len(dead)} worker(s) silent for over {ojs_settings.HEARTBEAT_TIMEOUT} s. "
                    "The reaper declares dead workers dead and requeues their jobs: is ojs_reaper running?",
                    "url": admin_changelist_url("worker"),
                }
            )
        lapsed = count_rows(Job.objects.filter(state=JobState.ACTIVE, lease_expires_at__lt=now), 1000)
        if lapsed.value:
            notes.append(
                {
                    "text": f"{lapsed} active job(s) past their visibility deadline and not yet requeued: "
                    "is ojs_reaper running?",
                    "url": admin_changelist_url("job", state=JobState.ACTIVE.value),
                }
            )
        overdue = count_rows(
            Job.objects.filter(state__in=[JobState.SCHEDULED, JobState.RETRYABLE], run_at__lt=now - OVERDUE_AFTER),
            1000,
        )
        if overdue.value:
            notes.append(
                {
                    "text": f"{overdue} scheduled or retryable job(s) overdue by more than "
                    f"{human_duration(OVERDUE_AFTER)}: is ojs_reaper running?",
                    "url": admin_changelist_url("job", state=JobState.RETRYABLE.value),
                }
            )
        paused = list(Queue.objects.filter(paused=True).order_by("name").values_list("name", flat=True)[:20])
        if paused:
            notes.append(
                {
                    "text": f"Paused queue(s), not handing out jobs: {', '.join(paused)}.",
                    "url": admin_changelist_url("queue", paused__exact="1"),
                }
            )
        return notes
