"""Cron: the schedules, when each fires next and fired last, its overlap policy, and
enable / disable / fire now. Every action goes through the core (``CronJob.objects``)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..core import schedules
from ..models import CronJob
from .base import ConsoleAdmin
from .display import EMPTY, admin_changelist_url, breakable, id_cell, moment, pretty_json
from .outcome import Outcome, apply_to_each

OVERLAP_HELP = {
    "skip": "skip a run while the previous one is unfinished",
    "allow": "run even if the previous one is unfinished",
    "cancel_previous": "cancel the unfinished previous run first",
}


@admin.register(CronJob)
class CronJobAdmin(ConsoleAdmin):
    # The overlap policy under the schedule: what fits 1280 px beside the filters.
    list_display = ("cron_name", "schedule_and_overlap", "status", "next_fire", "last_fire", "runs", "last_job")
    list_filter = ("enabled", "overlap_policy")
    list_title = "Cron schedules"
    search_fields = ("name",)
    ordering = ("name",)
    fields = (
        "name", "schedule", "status", "overlap", "next_fire", "last_fire", "runs", "last_job", "description", "template",
    )
    readonly_fields = fields
    actions = ("enable_schedules", "disable_schedules", "fire_now")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Schedules are registered by code or over the API (POST /ojs/v1/cron).
        return False

    @admin.display(description="name", ordering="name")
    def cron_name(self, cron: CronJob) -> SafeString:
        return breakable(cron.name)

    @admin.display(description="schedule")
    def schedule(self, cron: CronJob) -> SafeString:
        return format_html("<code>{}</code> {}", cron.expression, cron.timezone)

    @admin.display(description="schedule")
    def schedule_and_overlap(self, cron: CronJob) -> SafeString:
        return format_html('{}<br><span class="ojs-quiet">overlap: {}</span>', self.schedule(cron), self.overlap(cron))

    @admin.display(description="status", ordering="enabled")
    def status(self, cron: CronJob) -> SafeString:
        state = (format_html('<span class="ojs-running">{}</span>', "enabled") if cron.enabled
                 else format_html('<span class="ojs-paused">{}</span>', "disabled"))
        if schedules.overridden_here(cron):
            declared = "enabled" if cron.declared_enabled else "disabled"
            return format_html('{} <span class="ojs-quiet" title="{}">here; the code declares it {}</span>', state,
                               "kept across reaper restarts until the code's own enabled changes", declared)
        if cron.from_code:
            return format_html('{}<br><span class="ojs-quiet">{}</span>', state, "declared in code")
        return state

    @admin.display(description="next fire", ordering="next_run_at")
    def next_fire(self, cron: CronJob) -> SafeString | str:
        if not cron.enabled or cron.next_run_at is None:
            return EMPTY
        return moment(cron.next_run_at, timezone.now())

    @admin.display(description="last fire", ordering="last_run_at")
    def last_fire(self, cron: CronJob) -> SafeString | str:
        if cron.last_run_at is None:
            return "never"
        return moment(cron.last_run_at, timezone.now())

    @admin.display(description="overlap policy", ordering="overlap_policy")
    def overlap(self, cron: CronJob) -> SafeString:
        return format_html('<span title="{}">{}</span>', OVERLAP_HELP.get(cron.overlap_policy, ""), cron.overlap_policy)

    @admin.display(description="runs", ordering="run_count")
    def runs(self, cron: CronJob) -> str:
        return f"{cron.run_count:,}"

    @admin.display(description="last job")
    def last_job(self, cron: CronJob) -> SafeString | str:
        if cron.last_job_id is None:
            return EMPTY
        return id_cell(cron.last_job_id, admin_changelist_url("job", q=str(cron.last_job_id)))

    @admin.display(description="job template")
    def template(self, cron: CronJob) -> SafeString:
        return pretty_json(cron.job_template)

    # -- actions ------------------------------------------------------------------------

    @admin.action(description="Enable selected schedules (next fire computed from now)", permissions=["change"])
    def enable_schedules(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected schedules", permissions=["change"])
    def disable_schedules(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_enabled(request, queryset, False)

    @admin.action(description="Fire selected schedules now (once, outside their timetable)", permissions=["change"])
    def fire_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        apply_to_each(
            request, queryset, Outcome("Fire now"), lambda cron: schedules.fire_now(cron.name),
            skipped="its previous run is unfinished (overlap policy skip) or its template is invalid",
            missing="no longer exists",
        )

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet, enabled: bool) -> None:
        apply_to_each(
            request, queryset, Outcome("Enable" if enabled else "Disable"),
            lambda cron: schedules.set_enabled(cron.name, enabled),
            skipped="already enabled" if enabled else "already disabled",
            missing="no longer exists",
        )
