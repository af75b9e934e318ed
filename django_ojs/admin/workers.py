"""Workers, live: what each worker reports, what it was asked, and whether it is alive.

The list refreshes its live cells every few seconds without reloading the
page (``static/django_ojs/admin/live.js`` reads ``live/``, which renders the
same cells with the same methods), so ticked checkboxes survive. A worker
silent past ``OJS["HEARTBEAT_TIMEOUT"]`` is marked dead; the reaper will
soon remove it and put its jobs back. Quiet, terminate and resume set the
directive the worker receives with its next heartbeat reply
(ojs-worker-protocol §4.4); the page shows when the worker's reported
state has caught up with it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, JsonResponse
from django.urls import path, reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString
from django.views.decorators.cache import never_cache

from ..conf import ojs_settings
from ..core.clock import TxNow
from ..core.workers import DEAD, DRAINING, held_counts, overrun_shown, set_directive, shown_state
from ..models import Job, Worker
from ..protocol.states import JobState, WorkerState
from .base import ConsoleAdmin
from .display import (
    EMPTY,
    admin_changelist_url,
    breakable,
    human_duration,
    id_cell,
    moment,
    moment_field,
    timestamp,
)
from .outcome import Outcome, note_missing

LIVE_REFRESH_SECONDS = 3
# The cells the page refreshes in place; the others do not change while a worker lives.
LIVE_FIELDS = ("reported_state", "directive_status", "active_job_link", "heartbeat")


def is_dead(worker: Worker, now: dt.datetime) -> bool:
    """Declared dead by the reaper, or silent long enough to be (when no reaper runs)."""
    return shown_state(worker, now) == DEAD


def with_live_facts(workers: QuerySet, now: Any) -> QuerySet:
    """Workers with ``db_now`` (``now``: the clock to judge them by) and ``held``, the jobs each holds
    in the jobs table -- what every cell of the list and the overview reads."""
    held = (
        Job.objects.filter(state=JobState.ACTIVE, worker_id=OuterRef("pk"))
        .values("worker_id").annotate(n=Count("seq")).values("n")
    )
    return workers.annotate(db_now=now, held=Coalesce(Subquery(held), 0))


def running_jobs(worker: Worker) -> int:
    """How many jobs the worker holds: rows ``active`` and claimed by it (``with_live_facts``), not what
    its last heartbeat said -- 0 for a dead worker whose jobs were recovered."""
    held = getattr(worker, "held", None)
    return held if held is not None else held_counts([worker.pk]).get(worker.pk, 0)


def _terminating(worker: Worker) -> bool:
    return WorkerState.TERMINATE in (worker.state, worker.directive)


@admin.register(Worker)
class WorkerAdmin(ConsoleAdmin):
    # The host with its pid, the concurrency in "active jobs" (n / concurrency): what fits 1280 px.
    list_display = ("worker", "host", "queue_list", *LIVE_FIELDS, "uptime")
    list_display_links = None
    list_title = "Workers"
    search_fields = ("id", "hostname")
    ordering = ("hostname", "pid", "id")
    list_per_page = 100
    change_list_template = "admin/django_ojs/worker/change_list.html"
    fields = (
        "id", "hostname", "pid", "queue_list", "handled_types", "concurrency", "labels", *LIVE_FIELDS, "started",
        "registered", "directive_set", "last_beat_job_ids",
    )
    readonly_fields = fields
    actions = ("quiet_workers", "terminate_workers", "resume_workers")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A worker registers itself; it leaves by deregistering, or the reaper removes it once dead.
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return with_live_facts(super().get_queryset(request), TxNow())

    # -- cells ------------------------------------------------------------------------

    started = moment_field("started_at", "started")
    registered = moment_field("registered_at", "registered")
    directive_set = moment_field("directive_set_at", "directive set")

    @admin.display(description="worker", ordering="id")
    def worker(self, worker: Worker) -> SafeString:
        url = reverse("admin:django_ojs_worker_change", args=[quote(worker.pk)])
        # data-pk lets the live refresh find the row, with or without action checkboxes.
        return format_html('<span class="ojs-row" data-pk="{}">{}</span>', worker.pk, id_cell(worker.pk, url))

    @admin.display(description="host", ordering="hostname")
    def host(self, worker: Worker) -> SafeString:
        return format_html('{}<br><span class="ojs-quiet">pid {}</span>', breakable(worker.hostname or EMPTY), worker.pid)

    @admin.display(description="queues")
    def queue_list(self, worker: Worker) -> str:
        return ", ".join(str(queue) for queue in worker.queues) if worker.queues else EMPTY

    @admin.display(description="handles")
    def handled_types(self, worker: Worker) -> str:
        # NULL: the worker declared no types (an HTTP worker): it may take any job of its queues.
        if worker.handles is None:
            return "any type (declares none)"
        return ", ".join(worker.handles) or "no type: it claims nothing"

    @admin.display(description="jobs named in its last heartbeat")
    def last_beat_job_ids(self, worker: Worker) -> str:
        return ", ".join(str(job_id) for job_id in worker.active_job_ids) or EMPTY

    @admin.display(description="state")
    def reported_state(self, worker: Worker) -> SafeString:
        if is_dead(worker, worker.db_now):
            verdict = (
                f"declared dead at {timestamp(worker.declared_dead_at)}; its jobs were recovered"
                if worker.declared_dead_at
                else "not declared dead yet: is ojs_reaper running?"
            )
            return format_html(
                '<span class="ojs-worker ojs-worker-dead" title="no heartbeat for over {} s; {}">{}</span> '
                '<span class="ojs-quiet">was {}</span>',
                ojs_settings.HEARTBEAT_TIMEOUT,
                verdict,
                DEAD,
                worker.state,
            )
        if shown_state(worker, worker.db_now) == DRAINING:
            # Finishing its jobs before it exits (a SIGTERM, a deploy): expected, not an alarm.
            running = running_jobs(worker)
            alive = format_html(
                '<span class="ojs-worker ojs-worker-draining" title="reported {}: finishing its jobs, then exiting">'
                '{}</span> <span class="ojs-quiet">{}</span>',
                WorkerState.TERMINATE.value,
                DRAINING,
                f"{running} job{'s' if running != 1 else ''} still running" if running else "no job left, exiting",
            )
        else:
            alive = format_html('<span class="ojs-worker ojs-worker-{}">{}</span>', worker.state, worker.state)
        if worker.last_declared_dead_at is None:
            return alive
        # Frozen or cut off, then back: its jobs were given to others meanwhile (``last_declared_dead_at``).
        return format_html(
            '{}<br><span class="ojs-quiet">came back after being declared dead at {}</span>',
            alive, timestamp(worker.last_declared_dead_at),
        )

    @admin.display(description="directive")
    def directive_status(self, worker: Worker) -> SafeString | str:
        if worker.state == WorkerState.TERMINATE and worker.directive != WorkerState.TERMINATE:
            # Draining on its own (a SIGTERM): no directive applies to a worker on its way out.
            return format_html('<span class="ojs-quiet">{}</span>', "none: draining")
        if worker.directive == WorkerState.RUNNING and worker.directive_set_at is None and worker.state != worker.directive:
            # Quiet on its own (a SIGTSTP): "running" is the directive every worker starts with,
            # not an operator's request it fails to apply.
            return format_html('<span class="ojs-quiet">{}</span>', f"none: {worker.state} on its own")
        if worker.directive == worker.state:
            if worker.directive == WorkerState.RUNNING:
                return "running"
            return format_html('{} <span class="ojs-applied">✓ applied</span>', worker.directive)
        if worker.directive_set_at is None:
            return format_html('{} <span class="ojs-pending">requested, not applied yet</span>', worker.directive)
        return format_html(
            '{} <span class="ojs-pending">requested {}, not applied yet</span>',
            worker.directive, moment(worker.directive_set_at, worker.db_now, compact=True),
        )

    @admin.display(description="active jobs")
    def active_job_link(self, worker: Worker) -> SafeString | str:
        count = running_jobs(worker)
        text = f"{count} / {worker.concurrency}" if worker.concurrency else str(count)
        url = admin_changelist_url("job", state=JobState.ACTIVE.value, worker_id=worker.pk)
        link = format_html('<a href="{}">{}</a>', url, text)
        overrun = overrun_shown(worker, worker.db_now)
        if not overrun:
            return link
        # Slots a job no longer holds but a handler still does: "0 / 4" alone read as idle.
        return format_html(
            '{}<br><strong class="ojs-alarm" title="{}">+ {} held by handlers past their job</strong>', link,
            "handlers still running though their job timed out or was cancelled; restart the worker to free them",
            overrun,
        )

    @admin.display(description="last heartbeat", ordering="last_heartbeat_at")
    def heartbeat(self, worker: Worker) -> SafeString:
        ago = moment(worker.last_heartbeat_at, worker.db_now, compact=True)
        if is_dead(worker, worker.db_now):
            return format_html('<strong class="ojs-alarm">{}</strong>', ago)
        return format_html("{}", ago)

    @admin.display(description="up for")
    def uptime(self, worker: Worker) -> SafeString | str:
        started = worker.started_at or worker.registered_at
        if not started:
            return EMPTY
        if is_dead(worker, worker.db_now):
            # A dead worker is not up, whatever the clock says: how long it was, to its last heartbeat,
            # the last sign of it the admin API and manage.py ojs workers give beside "dead".
            return format_html(
                '<span class="ojs-quiet" title="from its start to its last heartbeat, at {}">was up {}</span>',
                timestamp(worker.last_heartbeat_at),
                human_duration(worker.last_heartbeat_at - started),
            )
        return human_duration(worker.db_now - started)

    # -- actions: directives through the core -------------------------------------------

    @admin.action(description="Quiet selected workers (stop fetching, finish active jobs)", permissions=["change"])
    def quiet_workers(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._direct(request, queryset, WorkerState.QUIET, "Quiet")

    @admin.action(description="Terminate selected workers (finish active jobs, then exit)", permissions=["change"])
    def terminate_workers(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._direct(request, queryset, WorkerState.TERMINATE, "Terminate")

    @admin.action(description="Resume selected workers (fetch again)", permissions=["change"])
    def resume_workers(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._direct(request, queryset, WorkerState.RUNNING, "Resume")

    def _direct(self, request: HttpRequest, queryset: QuerySet, directive: WorkerState, label: str) -> None:
        outcome = Outcome(label)
        workers = list(queryset)
        note_missing(request, len(workers), outcome, "no longer registered")
        for worker in workers:
            reason = _refusal(worker, directive)
            if reason:
                outcome.skip(reason)
            elif set_directive([worker.pk], directive):
                outcome.done_objects.append(worker)
            else:
                outcome.skip("no longer registered")
        outcome.send(request)

    # -- the live refresh ---------------------------------------------------------------

    def get_urls(self) -> list[Any]:
        live = path("live/", self.admin_site.admin_view(never_cache(self.live_view)), name="django_ojs_worker_live")
        return [live, *super().get_urls()]

    def live_view(self, request: HttpRequest) -> JsonResponse:
        """The live cells of the list's rows, rendered as on the page: ``{"rows": {pk: {field: html}}}``.

        Asked with the page's own query string, so filters, search and page
        number select the same workers as the page shows.
        """
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            # The list itself sends such a query back to ?e=1; a poll has no page to show it on.
            return JsonResponse({"error": "the query names no filter of the Workers list"}, status=400)
        rows = {
            str(worker.pk): {name: conditional_escape(getattr(self, name)(worker)) for name in LIVE_FIELDS}
            for worker in changelist.result_list
        }
        return JsonResponse({"rows": rows, "count": len(rows)})

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        context = {"live_url": reverse("admin:django_ojs_worker_live"), "live_seconds": LIVE_REFRESH_SECONDS}
        return super().changelist_view(request, {**(extra_context or {}), **context})


def _refusal(worker: Worker, directive: WorkerState) -> str | None:
    """Why a directive would be pointless or invalid for this worker; None when it is not."""
    if is_dead(worker, worker.db_now):
        return "dead (no heartbeat)"
    quiet_on_its_own = worker.state == WorkerState.QUIET and worker.directive == WorkerState.RUNNING
    if worker.directive == directive and not (directive == WorkerState.RUNNING and quiet_on_its_own):
        # A worker quiet on its own (SIGTSTP) kept "running" as its directive: asking it
        # again is what resumes it (the worker tells the request by when it was set).
        return f"already asked to {directive.value if directive != WorkerState.RUNNING else 'run'}"
    if _terminating(worker):
        # ojs-worker-protocol §2.3: a worker never goes back from terminate.
        return "terminating"
    return None
