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
from ..core import coverage, history, maintenance, maintenance_mode
from ..core.clock import TxNow, db_now
from ..core.counting import Tally, count_rows
from ..core.stats import available_by_queue, live_counts, oldest_available, state_counts
from ..core.workers import overrun_shown, recent_deaths
from ..models import Job, Overview, Queue, Worker
from ..protocol.states import JobState
from .chart import DAYS, HOURS, MINUTES, Series, Slots, bars
from .display import admin_changelist_url, human_duration, moment, timestamp
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
HOUR = dt.timedelta(hours=1)
# A queue whose oldest waiting job has waited longer is named in "needs attention".
LONG_WAIT = dt.timedelta(minutes=5)
# At most this many lines of one kind (queues, types) in "needs attention".
ATTENTION_ROWS = 20


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
        # One grouped count of the waiting and held jobs serves the jobs per state and every queue's
        # line in "needs attention": no statement per queue, and one figure for a queue's jobs.
        live = live_counts()
        counts = state_counts(live)
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
            "attention": self._attention(request, now, available_by_queue(live)),
            "reaper": reaper_status(now),
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

    def _attention(self, request: HttpRequest, now: dt.datetime, available: dict[str, Tally]) -> list[dict[str, str]]:
        """Signs that something is wrong, each with where to look: a list filtered to those jobs.

        Each count is bounded (``count_rows``: exact to 1,000, the planner's estimate past it)
        and read from a partial index: finished jobs by ``ojs_job_finished``, waiting ones by
        ``ojs_job_available``, held ones by ``ojs_job_lease`` -- never a count over all history.
        A queue's waiting jobs are ``available`` (queue -> tally), the jobs per state's own count.
        """
        notes: list[dict[str, str]] = []

        def note(kind: str, text: str, url: str) -> None:
            notes.append({"kind": kind, "text": text, "url": url})

        reaper = reaper_status(now)
        if reaper.missing:
            note("reaper", reaper.text, admin_changelist_url("job", state=JobState.RETRYABLE.value))
        discarded = Job.objects.filter(state=JobState.DISCARDED)
        last_hour = count_rows(discarded.filter(finished_at__gte=now - HOUR), 1000)
        if last_hour.value:
            before = count_rows(discarded.filter(finished_at__gte=now - 2 * HOUR, finished_at__lt=now - HOUR), 1000)
            note("discarded", f"{last_hour} job(s) discarded or dead-lettered in the last hour, "
                 f"{_trend(last_hour.value, before.value)} {before} the hour before.",
                 admin_changelist_url("job", state=JobState.DISCARDED.value, finished_within="1h"))
        unrunnable, _complete = coverage.unrunnable(now)
        for item in unrunnable[:ATTENTION_ROWS]:
            note("unrunnable", f"{item.count:,} job(s) of type {item.type} on queue {item.queue} that no running "
                 f"worker can handle, the oldest waiting {human_duration(now - item.oldest_at)}: deploy its "
                 "handler to a worker of the queue, or fix the type.",
                 admin_changelist_url("job", state=JobState.AVAILABLE.value, queue=item.queue, type=item.type))
        for queue in coverage.unconsumed(available, now, limit=ATTENTION_ROWS):
            note("unconsumed", f"{queue.waiting} job(s) waiting on queue {queue.queue}, and no live worker reads it.",
                 admin_changelist_url("job", state=JobState.AVAILABLE.value, queue=queue.queue))
        # Workers the reaper has declared dead are handled; silent ones it has not are the alarm.
        unreaped = Worker.objects.filter(declared_dead_at__isnull=True).annotate(db_now=TxNow())
        silent = [w for w in unreaped if is_dead(w, w.db_now)]
        if silent:
            note("silent", f"{len(silent)} worker(s) silent for over {ojs_settings.HEARTBEAT_TIMEOUT} s. "
                 "The reaper declares dead workers dead and requeues their jobs: is ojs_reaper running?",
                 admin_changelist_url("worker"))
        # Live workers whose handlers outlived their job: slots held that a job list shows as free.
        for worker in unreaped.filter(overrun_handlers__gt=0).order_by("id")[:ATTENTION_ROWS]:
            overrun = overrun_shown(worker, worker.db_now)
            if not overrun:
                continue
            left = (worker.concurrency or 0) - overrun
            runs = "runs nothing" if left <= 0 else f"runs at most {left} job(s) at once"
            note("overrun", f"Worker {worker.id}: {overrun} slot(s) held by handlers still running "
                 f"though their job timed out or was cancelled; it {runs} until they return. Restart it to free them.",
                 admin_changelist_url("worker"))
        # Those that came back count too: they were dead for a while, and their jobs were given to others.
        deaths = recent_deaths(now)
        if deaths.declared:
            back = f" {deaths.came_back} of them came back since and run again." if deaths.came_back else ""
            note("dead", f"{deaths.declared} worker(s) declared dead in the last hour (no heartbeat for "
                 f"{ojs_settings.HEARTBEAT_TIMEOUT} s: killed, frozen or cut off); their jobs were put back.{back}",
                 admin_changelist_url("worker"))
        lapsed = count_rows(Job.objects.filter(state=JobState.ACTIVE, lease_expires_at__lt=now), 1000)
        if lapsed.value:
            note("lapsed", f"{lapsed} active job(s) past their visibility deadline and not yet requeued: "
                 "is ojs_reaper running?", admin_changelist_url("job", state=JobState.ACTIVE.value))
        overdue = count_rows(
            Job.objects.filter(state__in=[JobState.SCHEDULED, JobState.RETRYABLE], run_at__lt=now - OVERDUE_AFTER),
            1000,
        )
        if overdue.value:
            note("overdue", f"{overdue} scheduled or retryable job(s) overdue by more than "
                 f"{human_duration(OVERDUE_AFTER)}: is ojs_reaper running?",
                 admin_changelist_url("job", state=JobState.RETRYABLE.value))
        names = list(Queue.objects.filter(paused=False).order_by("name").values_list("name", flat=True)[:ATTENTION_ROWS])
        oldest = oldest_available(names)
        for name, since in sorted(oldest.items(), key=lambda pair: pair[1] or now):
            if since is not None and now - since > LONG_WAIT:
                note("waiting", f"Queue {name}: its oldest waiting job has waited {human_duration(now - since)}.",
                     admin_changelist_url("job", state=JobState.AVAILABLE.value, queue=name))
        # Each paused queue with how long and what waits on it: a pause forgotten shows as hours, not a name.
        paused = Queue.objects.filter(paused=True).order_by("paused_at", "name").values_list("name", "paused_at")
        for name, since in paused[:ATTENTION_ROWS]:
            waiting = available.get(name, Tally(0, True))
            how_long = "" if since is None else f" for {human_duration(now - since)}"
            note("paused", f"Queue {name} paused{how_long}, not handing out jobs: {waiting} job(s) waiting.",
                 admin_changelist_url("queue", paused__exact="1"))
        return notes


@dataclass(frozen=True)
class ReaperStatus:
    """The reaper's last tick as the overview says it: ``missing`` in red, else a quiet line."""

    last_tick: dt.datetime | None
    missing: bool
    text: str


def reaper_status(now: dt.datetime) -> ReaperStatus:
    """From the reapers' tick rows (``ReaperTick``): missing once ``TICKS_MISSED`` ticks passed without one."""
    last = maintenance.last_reaper_tick()
    if last is None:
        return ReaperStatus(None, True, "No reaper has ticked yet: start manage.py ojs_reaper. Without it "
                            "retries, scheduled jobs, lapsed leases and dead workers wait.")
    silent = now - last
    if silent.total_seconds() > maintenance.TICKS_MISSED * maintenance.TICK_RECORD_INTERVAL:
        return ReaperStatus(last, True, f"No reaper for {int(silent.total_seconds())} s (its last tick at "
                            f"{timestamp(last)}): retries, scheduled jobs, lapsed leases and dead workers wait. "
                            "Is manage.py ojs_reaper running?")
    return ReaperStatus(last, False, f"Reaper: last tick at {timestamp(last)} ({human_duration(silent)} ago).")


def _trend(now_count: int, before: int) -> str:
    if now_count > before:
        return "up from"
    return "down from" if now_count < before else "as many as"
