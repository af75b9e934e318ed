"""Workflows: the list, and a page that draws the workflow's tree with each step's state.

The picture is server-rendered HTML (no JavaScript): a chain is a row of
boxes joined by arrows, a group a stack, a batch a stack with its callbacks
below. Each job step links to its job's page and shows its result or error;
a failed step has a "Retry from here" button. Cancel and retry go through
the core (``core/workflows.py``).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.middleware.csrf import get_token
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from ..core import workflows as store
from ..core.progress import workflow_progress
from ..models import Workflow, WorkflowNode
from ..protocol.errors import OJSError
from ..protocol.progress import percent
from ..protocol.workflows import FAILED, Node
from .base import ConsoleAdmin
from .display import EMPTY, id_cell, moment_field
from .outcome import Outcome, apply_to_each

PREVIEW_CHARS = 120


@admin.register(Workflow)
class WorkflowAdmin(ConsoleAdmin):
    list_display = ("workflow", "type", "state_badge", "progress", "created", "finished")
    # The name links to the page; the id beside it has its copy button (a button inside a link is not HTML).
    list_display_links = None
    list_filter = ("state", "type")
    list_title = "Workflows"
    search_fields = ("=id", "name")
    ordering = ("-created_at",)
    list_per_page = 50
    fields = ("id", "name", "type", "state_badge", "progress", "share", "jobs", "created", "finished")
    readonly_fields = fields
    actions = ("cancel_workflows",)
    change_form_template = "admin/django_ojs/workflow/change_form.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # created by producers: POST /ojs/v1/workflows, django_ojs.chain(...).enqueue()

    @admin.display(description="workflow")
    def workflow(self, workflow: Workflow) -> SafeString:
        url = reverse("admin:django_ojs_workflow_change", args=[workflow.pk])
        return format_html('<a href="{}">{}</a> {}', url, workflow.name or EMPTY, id_cell(workflow.id))

    @admin.display(description="state", ordering="state")
    def state_badge(self, workflow: Workflow) -> SafeString:
        return _badge(workflow.state)

    created = moment_field("created_at", "created")
    finished = moment_field("finished_at", "finished")

    @admin.display(description="steps done")
    def progress(self, workflow: Workflow) -> str:
        # The workflow's own steps, as GET /ojs/v1/workflows/{id} counts them (steps_*): a
        # nested group is one step; the "jobs" column counts every job.
        steps = store.step_counts(workflow)
        return f"{steps['completed']} / {steps['total']}" + (f", {steps['failed']} failed" if steps["failed"] else "")

    @admin.display(description="progress")
    def share(self, workflow: Workflow) -> str:
        # What GET /ojs/v1/workflows/{id}/progress answers (ojs-progress §9), as a percentage.
        return percent(workflow_progress(workflow)["progress"]) or EMPTY

    @admin.display(description="jobs")
    def jobs(self, workflow: Workflow) -> str:
        # The counts GET /ojs/v1/workflows/{id} (jobs_by_state) and manage.py ojs workflow show.
        counts = store.job_counts(workflow)
        states = ", ".join(f"{count} {state}" for state, count in counts["by_state"].items())
        return f"{counts['ended']} of {counts['total']} ended ({percent(counts['share_ended'])}): {states}"

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None):
        workflow = self.get_object(request, object_id)
        extra: dict[str, Any] = {}
        if workflow is not None:
            may_move = self.has_change_permission(request)
            rows = {row.path: row for row in workflow.nodes.all()}
            token = get_token(request) if may_move else ""
            extra["workflow_picture"] = format_html(
                '<div class="ojs-wf">{}</div>', _draw(Node.from_dict(workflow.definition), rows, workflow, token)
            )
            if may_move and workflow.state == "running":
                extra["cancel_url"] = reverse("admin:django_ojs_workflow_cancel", args=[workflow.pk])
        return super().change_view(request, object_id, form_url, {**extra, **(extra_context or {})})

    # -- moves ---------------------------------------------------------------------------

    def get_urls(self) -> list:
        return [
            path("<path:object_id>/cancel/", self.admin_site.admin_view(self.cancel_view),
                 name="django_ojs_workflow_cancel"),
            path("<path:object_id>/retry/<str:step>/", self.admin_site.admin_view(self.retry_view),
                 name="django_ojs_workflow_retry"),
            *super().get_urls(),
        ]

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        workflow = self._for_move(request, object_id)
        try:
            _, counts = store.cancel(workflow.pk)
            messages.success(request, f"Workflow cancelled: {counts['steps_cancelled']} steps cancelled.")
        except OJSError as exc:
            messages.warning(request, f"Not cancelled: {exc.message}")
        return HttpResponseRedirect(reverse("admin:django_ojs_workflow_change", args=[workflow.pk]))

    def retry_view(self, request: HttpRequest, object_id: str, step: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        workflow = self._for_move(request, object_id)
        try:
            store.retry_step(workflow.pk, step)
            messages.success(request, f"Step {step} enqueued again; the workflow runs on from there.")
        except OJSError as exc:
            messages.warning(request, f"Not retried: {exc.message}")
        return HttpResponseRedirect(reverse("admin:django_ojs_workflow_change", args=[workflow.pk]))

    def _for_move(self, request: HttpRequest, object_id: str) -> Workflow:
        if not self.has_change_permission(request):
            raise PermissionDenied
        workflow = self.get_object(request, object_id)
        if workflow is None:
            raise Http404("no such workflow")
        return workflow

    @admin.action(description="Cancel selected workflows (and every unfinished step)", permissions=["change"])
    def cancel_workflows(self, request: HttpRequest, queryset: QuerySet) -> None:
        apply_to_each(
            request, queryset, Outcome("Cancel"), lambda workflow: store.cancel(workflow.pk),
            skipped="already ended", missing="no longer exists",
        )


def _badge(state: str) -> SafeString:
    return format_html('<span class="ojs-state ojs-wf-state-{}">{}</span>', state, state)


def _draw(node: Node, rows: dict[str, WorkflowNode], workflow: Workflow, token: str) -> SafeString:
    row = rows[node.path]
    if node.kind == "job":
        return _draw_job(node, row, workflow, token)
    members = [_draw(child, rows, workflow, token) for child in node.children]
    joiner = mark_safe('<span class="ojs-wf-arrow">&rarr;</span>') if node.kind == "chain" else mark_safe("")
    inner = mark_safe(joiner.join(members))  # the members are format_html output
    callbacks = ""
    if node.callbacks:
        callbacks = format_html(
            '<div class="ojs-wf-callbacks">{}</div>',
            format_html_join("", "<div><small>{}</small>{}</div>",
                             ((name, _draw(cb, rows, workflow, token)) for name, cb in node.callbacks.items())),
        )
    return format_html(
        '<div class="ojs-wf-box ojs-wf-{} ojs-wf-is-{}" data-path="{}"><div class="ojs-wf-head">{} {} {}</div>'
        '<div class="ojs-wf-members">{}</div>{}</div>',
        node.kind, row.state, node.path, node.kind, node.name, _badge(row.state), inner, callbacks,
    )


def _draw_job(node: Node, row: WorkflowNode, workflow: Workflow, token: str) -> SafeString:
    """A job step; ``token`` (the CSRF token) is given only to operators who may retry it."""
    job_link = EMPTY
    if row.job_seq:
        job_link = format_html('<a href="{}">job</a>', reverse("admin:django_ojs_job_change", args=[row.job_seq]))
    detail = ""
    if row.error:
        detail = format_html('<div class="ojs-wf-error"><code>{}</code> {}</div>',
                             row.error.get("type") or row.error.get("code", ""), row.error.get("message", ""))
    elif row.result is not None:
        text = json.dumps(row.result)
        detail = format_html('<div class="ojs-wf-result" title="{}">result: <code>{}</code></div>',
                             text, text[:PREVIEW_CHARS] + ("…" if len(text) > PREVIEW_CHARS else ""))
    button = ""
    if token and store.retryable(row) and workflow.state in (FAILED, "running"):
        button = format_html(
            '<form method="post" action="{}"><input type="hidden" name="csrfmiddlewaretoken" value="{}">'
            '<button type="submit" class="ojs-wf-retry">Retry from here</button></form>',
            reverse("admin:django_ojs_workflow_retry", args=[workflow.pk, node.path]), token,
        )
    return format_html(
        '<div class="ojs-wf-box ojs-wf-job ojs-wf-is-{}" data-path="{}"><div class="ojs-wf-head">'
        "<strong>{}</strong> {} {}</div>{}{}</div>",
        row.state, node.path, node.type, _badge(row.state), job_link, detail, button,
    )


def workflow_link(job: Any) -> SafeString | str:
    """For the job page: the workflow this job is a step of."""
    workflow_id = (job.extra or {}).get("workflow_id")
    if not workflow_id:
        return EMPTY
    url = reverse("admin:django_ojs_workflow_change", args=[workflow_id])
    return format_html('<a href="{}">{}</a> (step {})', url, workflow_id, (job.extra or {}).get("workflow_step", ""))
