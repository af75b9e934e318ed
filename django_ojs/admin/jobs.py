"""The Jobs changelist and job page.

Built for a table of millions: counts are bounded or estimated
(``counting``), sidebar choices cost no scan (``filters``), search goes
through indexes (``search``), the list is in insertion order (the primary
key, newest first) and no other column can be sorted, since sorting by it
would sort every matching row. The job page is read-only: a job changes
only through the buttons, which are the core's moves.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Substr
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    JsonResponse,
)
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.views.decorators.cache import never_cache

from ..core import waits
from ..core.clock import TxNow
from ..core.django_tasks import task_column
from ..core.search import HELP_TEXT, job_search
from ..models import Job
from ..protocol.errors import InvalidRequest, OJSError
from ..protocol.states import TERMINAL
from . import job_pages
from .base import ConsoleAdmin
from .counting import EstimatedCountPaginator
from .display import EMPTY, breakable, human_duration, id_cell, pretty_json, state_badge
from .filters import (
    FinishedWithinFilter,
    PriorityFilter,
    QueueFilter,
    StateFilter,
    TaskFilter,
    TypeFilter,
    WaitFilter,
    WorkerFilter,
)
from .job_moves import ACTIVATE, CANCEL, DISCARD, RETRY, JobMove, moves_from
from .workflows import workflow_link

# Columns a list never shows and that may hold up to a megabyte each.
BULKY_FIELDS = (
    "args", "meta", "result", "error", "retry", "unique", "rate_limit", "extra", "given_times", "tags", "signals",
    "waits",
)
# A list shows this much of a job's last error, wrapped; the job's page shows all of it.
ERROR_PREVIEW_CHARS = 300


class JobChangeList(ChangeList):
    """Loads only what the list shows, plus a preview of the last error."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        # The count is said once, by the paginator line, which tells an
        # estimate from an exact figure; the search bar would repeat it bare.
        self.full_result_count = self.result_count

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet:
        return (
            super()
            .get_queryset(request, exclude_parameters)
            .defer(*BULKY_FIELDS)
            .annotate(
                # The @task function of a django.task job: its arguments are not loaded.
                task=task_column(),
                error_type=KT("error__type"),
                # One character more than is shown, to tell a cut message from a whole one.
                error_preview=Substr(KT("error__message"), 1, ERROR_PREVIEW_CHARS + 1),
            )
        )


class JobAdminBase(ConsoleAdmin):
    """What the Jobs and the Failed jobs pages share."""

    # The moves this page offers, as actions and as buttons on a job's page.
    job_moves: tuple[JobMove, ...] = ()
    # Why a ticked job is not among the rows an action finds.
    missing_reason = "no longer exists"

    def has_purge_permission(self, request: HttpRequest) -> bool:
        """Purging deletes jobs for good: it needs the page's delete permission, not its change one.

        Not ``has_delete_permission``, which stays False so that the admin's
        generic delete, which bypasses the core, is offered to no one.
        """
        codename = get_permission_codename("delete", self.opts)
        return request.user.has_perm(f"{self.opts.app_label}.{codename}")

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    list_per_page = 50
    sortable_by = ()
    # Shows the search box; ``get_search_results`` decides what a term means.
    search_fields = ("id", "type", "meta")
    search_help_text = HELP_TEXT
    # The id cell links to the job's page itself, beside its copy button (a button inside a link is not HTML).
    list_display_links = None
    change_form_template = "admin/django_ojs/job/change_form.html"
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "id", "type", "queue", "state_badge", "priority", "attempts", "dead_letter_kept",
                    "tags_list", "cron_name", "workflow",
                ]
            },
        ),
        ("Timeline", {"fields": ["timeline"]}),
        ("Reservation", {"fields": ["reservation"]}),
        ("Progress", {"fields": ["progress_view"]}),
        ("Snooze and signals", {"fields": ["waits_view"]}),
        # Durable jobs: what a retry resumes from (docs/how-to/durable-jobs.md).
        ("Checkpoint and steps", {"fields": ["checkpoint_view", "steps_view"]}),
        ("Arguments", {"fields": ["args_json"]}),
        ("Meta", {"fields": ["meta_json"]}),
        ("Result", {"fields": ["result_json"]}),
        # The job's story: what happened to it, then why each attempt failed.
        ("Events", {"fields": ["event_history"]}),
        ("Error history", {"fields": ["error_history"]}),
        ("Unique key and rate limit", {"fields": ["uniqueness", "rate_limit"]}),
        (
            "Options",
            {
                "classes": ["collapse"],
                "fields": ["retry_json", "timeout", "visibility_timeout", "schema", "extra_json"],
            },
        ),
    ]
    readonly_fields = [name for _, options in fieldsets for name in options["fields"]]

    def __init__(self, model: type[Job], admin_site: admin.AdminSite):
        super().__init__(model, admin_site)
        self.actions = [move.as_admin_action() for move in self.job_moves]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Jobs are pushed by producers (the HTTP API, enqueue()).
        return False

    # -- the list -------------------------------------------------------------------

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return JobChangeList

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The database's clock, so ages agree with the timestamps the core wrote.
        return super().get_queryset(request).annotate(db_now=TxNow())

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        try:
            condition = job_search(search_term)
        except InvalidRequest as bad:
            # A malformed term finds nothing and says why, instead of a 500.
            messages.error(request, bad.message)
            return queryset.none(), False
        return (queryset.filter(condition) if condition is not None else queryset), False

    @admin.display(description="job")
    def type_and_id(self, job: Job) -> SafeString:
        """The job's type (with the task a ``django.task`` job runs), and below it its short id (a link to
        its page) with the copy button."""
        url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[quote(job.pk)])
        task = getattr(job, "task", None)
        if task:
            return format_html('<span class="ojs-type">{}</span> <span class="ojs-task">task {}</span><br>{}',
                               breakable(job.type), breakable(task), id_cell(job.id, url))
        return format_html('<span class="ojs-type">{}</span><br>{}', breakable(job.type), id_cell(job.id, url))

    @admin.display(description="queue")
    def queue_name(self, job: Job) -> SafeString:
        return breakable(job.queue)

    @admin.display(description="state")
    def state_badge(self, job: Job) -> SafeString:
        return state_badge(job.state)

    @admin.display(description="state")
    def state_now(self, job: Job) -> SafeString:
        """The state, the attempt's progress while it means something, and where the job stands in time."""
        progress = job_pages.progress_cell(job)
        if progress:
            progress = format_html(' <strong class="ojs-progress-cell">{}</strong>', progress)
        return format_html(
            '{}{}<br><span class="ojs-status-line">{}</span>',
            state_badge(job.state), progress, job_pages.status_line(job, job.db_now),
        )

    @admin.display(description="attempts")
    def attempts(self, job: Job) -> str:
        # Snoozes run the handler without spending an attempt: said beside it, as INFO's `snoozes`.
        snoozed = f" · {job.snoozes} snoozed" if job.snoozes else ""
        if job.releases:
            # Released uncharged (a shutdown, a NACK's requeue, a snooze): "4 / 3" would read as a
            # broken policy. The attempts charged beside it, as the worker's log says them.
            return f"{job.attempt} ({job.attempt - job.releases} / {job.max_attempts} charged){snoozed}"
        return f"{job.attempt} / {job.max_attempts}{snoozed}"

    @admin.display(description="dead letter")
    def dead_letter_kept(self, job: Job) -> SafeString | str:
        return job_pages.dead_letter_line(job, job.db_now)

    @admin.display(description="age")
    def age(self, job: Job) -> str:
        return human_duration(job.db_now - job.created_at, precise=False)

    @admin.display(description="last error")
    def last_error(self, job: Job) -> SafeString | str:
        error_type = getattr(job, "error_type", None)
        if error_type is None:
            return ""
        message = job.error_preview or ""
        if len(message) > ERROR_PREVIEW_CHARS:
            message = message[:ERROR_PREVIEW_CHARS] + "…"
        return format_html('<span class="ojs-error-preview"><code>{}</code> {}</span>', breakable(error_type), message)

    # -- the job's page -----------------------------------------------------------

    @admin.display(description="tags")
    def tags_list(self, job: Job) -> str:
        return ", ".join(str(tag) for tag in job.tags) if job.tags else EMPTY

    @admin.display(description="timeline")
    def timeline(self, job: Job) -> SafeString:
        return job_pages.timeline(job, job.db_now)

    @admin.display(description="reservation")
    def reservation(self, job: Job) -> SafeString | str:
        return job_pages.reservation(job, job.db_now)

    @admin.display(description="progress")
    def progress_view(self, job: Job) -> SafeString:
        # The live refresh (static/django_ojs/admin/progress.js) replaces this box until the job is over.
        url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_progress", args=[quote(job.pk)])
        return format_html(
            '<div class="ojs-progress" data-ojs-progress-url="{}" data-ojs-progress-live="{}">{}</div>',
            url, "" if job.state in TERMINAL else "1", job_pages.progress(job, job.db_now),
        )

    @admin.display(description="snooze and signals")
    def waits_view(self, job: Job) -> SafeString:
        return job_pages.waits(job, job.db_now)

    @admin.display(description="events")
    def event_history(self, job: Job) -> SafeString:
        limit = job_pages.EVENT_HISTORY_MAX if getattr(job, "all_events", False) else job_pages.EVENT_HISTORY_LIMIT
        return job_pages.event_history(job, job.db_now, limit)

    @admin.display(description="last checkpoint")
    def checkpoint_view(self, job: Job) -> SafeString:
        return job_pages.checkpoint(job, job.db_now)

    @admin.display(description="steps")
    def steps_view(self, job: Job) -> SafeString:
        return job_pages.steps(job, job.db_now)

    @admin.display(description="errors")
    def error_history(self, job: Job) -> SafeString:
        return job_pages.error_history(job, job.db_now)

    @admin.display(description="args")
    def args_json(self, job: Job) -> SafeString:
        return pretty_json(job.args)

    @admin.display(description="meta")
    def meta_json(self, job: Job) -> SafeString:
        return pretty_json(job.meta)

    @admin.display(description="result")
    def result_json(self, job: Job) -> SafeString:
        return pretty_json(job.result)

    @admin.display(description="retry policy")
    def retry_json(self, job: Job) -> SafeString:
        return pretty_json(job.retry)

    @admin.display(description="unique key")
    def uniqueness(self, job: Job) -> SafeString:
        return job_pages.uniqueness(job, job.db_now)

    @admin.display(description="rate limit")
    def rate_limit(self, job: Job) -> SafeString:
        return job_pages.rate_limit(job)

    @admin.display(description="workflow")
    def workflow(self, job: Job) -> SafeString | str:
        return workflow_link(job)

    @admin.display(description="other attributes")
    def extra_json(self, job: Job) -> SafeString:
        return pretty_json(job.extra)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Job | None:
        """A job's page answers to its OJS id as well as to its row number.

        The id is what logs, the API and other services know a job by, so
        ``/admin/django_ojs/job/<uuid>/change/`` must find it; row numbers
        are the admin's own links (the primary key keeps the list in
        insertion order).
        """
        job = None
        if from_field is None:
            try:
                job_id = uuid.UUID(str(object_id))
            except ValueError:
                job = super().get_object(request, object_id, from_field)
            else:
                job = self.get_queryset(request).filter(id=job_id).first()
        else:
            job = super().get_object(request, object_id, from_field)
        if job is not None:
            # ?events=all on the job's page: the event history's larger bound.
            job.all_events = request.GET.get("events") == "all"
        return job

    # -- buttons on the job's page ----------------------------------------------------

    def get_urls(self) -> list[Any]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_move"
        move = path("<path:object_id>/move/<str:move>/", self.admin_site.admin_view(self.move_view), name=name)
        progress = path(
            "<path:object_id>/progress/",
            self.admin_site.admin_view(never_cache(self.progress_live_view)),
            name=f"{self.opts.app_label}_{self.opts.model_name}_progress",
        )
        signal = path(
            "<path:object_id>/signal/", self.admin_site.admin_view(self.signal_view),
            name=f"{self.opts.app_label}_{self.opts.model_name}_signal",
        )
        return [move, progress, signal, *super().get_urls()]

    def signal_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Send a signal to this job (GET: the form; POST: deliver it), as POST /jobs/{id}/signal does."""
        if not self.has_change_permission(request):
            raise PermissionDenied
        job = self.get_object(request, unquote(object_id))
        if job is None:
            raise Http404("no such job")
        job_url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[quote(job.pk)])
        name, text = request.POST.get("name", job.waiting_for or ""), request.POST.get("payload", "null")
        if request.method == "POST":
            try:
                value = json.loads(text)
            except ValueError:
                messages.error(request, "The payload must be JSON (null, a number, a string in quotes, an object...).")
            else:
                try:
                    signalled = waits.signal(job.id, name, value)
                except OJSError as refused:
                    messages.error(request, refused.message)
                else:
                    messages.success(request, f"Signal {name} delivered; the job is {signalled.state}.")
                    return HttpResponseRedirect(job_url)
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "job": job, "job_url": job_url,
            "name": name, "payload": text, "title": f"Send a signal to job {job.id}",
            "changelist_url": reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist"),
        }
        return TemplateResponse(request, "admin/django_ojs/job/signal.html", context)

    def progress_live_view(self, request: HttpRequest, object_id: str) -> JsonResponse:
        """The job page's progress box, rendered as on the page, and whether it may still move."""
        # admin_view only asks for staff: the page's own view permission guards what it shows.
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        job = self.get_object(request, unquote(object_id))
        if job is None:
            raise Http404("no such job")
        html = job_pages.progress(job, job.db_now)
        # Until it is over: a waiting job may start and report at any moment.
        return JsonResponse({"html": str(html), "live": job.state not in TERMINAL})

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        job = self.get_object(request, unquote(object_id))
        buttons = []
        if job is not None and self.has_change_permission(request):
            name = f"admin:{self.opts.app_label}_{self.opts.model_name}_move"
            allowed = self.get_actions(request)
            buttons = [
                {"label": move.label, "url": reverse(name, args=[quote(job.pk), move.name]), "move": move}
                for move in moves_from(job.state, self.job_moves)
                if move.name in allowed
            ]
        signal_url = None
        if job is not None and self.has_change_permission(request) and job.state not in TERMINAL:
            signal_url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_signal", args=[quote(job.pk)])
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), "job_moves": buttons, "signal_url": signal_url}
        )

    def move_view(self, request: HttpRequest, object_id: str, move: str) -> HttpResponse:
        """Run one action on this job alone: the buttons of the job's page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied
        actions = self.get_actions(request)
        if move not in actions:
            raise Http404(f"no action {move!r} here")
        job = self.get_object(request, unquote(object_id))
        if job is None:
            raise Http404("no such job")
        # Django 6.1 returns Action objects, earlier versions (func, name, description).
        action = getattr(actions[move], "func", None) or actions[move][0]
        response = action(self, request, self.get_queryset(request).filter(pk=job.pk))
        return response or HttpResponseRedirect(self.url_after_move(job, move))

    def url_after_move(self, job: Job, move: str) -> str:
        return reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[quote(job.pk)])


@admin.register(Job)
class JobAdmin(JobAdminBase):
    list_title = "Jobs"
    job_moves = (CANCEL, ACTIVATE, RETRY, DISCARD)
    # What fits 1280 px beside the admin's navigation and the filters: the type
    # with the id, the state with its progress; the priority is a filter and on
    # the job's page.
    list_display = ("type_and_id", "queue_name", "state_now", "attempts", "age", "last_error")
    list_filter = (
        StateFilter, QueueFilter, TypeFilter, TaskFilter, PriorityFilter, WaitFilter, WorkerFilter, FinishedWithinFilter,
    )
    ordering = ("-seq",)
