"""Actions on everything the list's filter matches, not only the ticked rows.

Django hands an action the whole filtered list when the operator ticks the
page and clicks "Select all N". A per-row action stops at ``ACTION_LIMIT``;
here the move instead goes to the core's bulk move (``core/bulk.py``), which
walks every matching job in batches of 1,000, each its own short
transaction that never waits on a worker's lock. First a confirmation page
says how many jobs the move can take (exact up to 10,000, the planner's
estimate beyond) and which filter picked them; then the outcome comes back
as one message: moved, and skipped by reason.

The admin log gets one entry for the whole run (a hundred thousand rows of
"changed" would bury everything else); each job's own record of the move is
its lifecycle event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

from ..core import bulk
from ..core.counting import count_rows
from .confirm import CONFIRMED_FIELD, SAMPLE_ROWS, echoed_fields

if TYPE_CHECKING:
    from .job_moves import JobMove

# The confirmation's value: "all:<action>", so a confirmed per-row action is never read as filter-wide.
PREFIX = "all:"
# A run stops between batches after this long and says what is left, so the
# page answers well within a proxy's or gunicorn's 30 s timeout; on a 2-core
# machine under load a batch of 1,000 retries takes about 0.3 s.
TIME_BUDGET_SECONDS = 20
# Query parameters of the list that are not filters.
_NOT_FILTERS = {"p", "o", "_changelist_filters", "e"}


def whole_filter_chosen(request: HttpRequest) -> bool:
    return request.POST.get("select_across") == "1"


def act(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, move: JobMove) -> TemplateResponse | None:
    """Ask first; once confirmed, run the bulk move and report it."""
    if request.POST.get(CONFIRMED_FIELD) != PREFIX + move.name:
        return _confirmation(modeladmin, request, queryset, move)
    report = bulk.bulk_move(queryset, move.bulk_name, time_budget=TIME_BUDGET_SECONDS)
    _log(modeladmin, request, move, report)
    level = messages.WARNING if report.skipped_total or report.truncated else messages.SUCCESS
    messages.add_message(request, level, message(move, report))
    return None


def message(move: JobMove, report: bulk.BulkReport) -> str:
    text = f"{move.label}, everything matching the filter: {report.moved:,} done in {report.batches:,} batches"
    if report.skipped_total:
        reasons = ", ".join(f"{reason} ({n:,})" for reason, n in report.skipped.most_common())
        text += f", {report.skipped_total:,} skipped because: {reasons}. Run it again to take them up."
    else:
        text += "."
    if report.truncated:
        text += f" More jobs match: it stopped after {TIME_BUDGET_SECONDS} s to answer; run the action again for the rest."
    return text


def filter_description(request: HttpRequest) -> list[tuple[str, str]]:
    """The list's filters and search term, as the operator chose them."""
    pairs = []
    for name, values in request.GET.lists():
        if name in _NOT_FILTERS:
            continue
        label = "search" if name == "q" else name.split("__")[0]
        pairs += [(label, value) for value in values if value != ""]
    return pairs


def _confirmation(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, move: JobMove
) -> TemplateResponse:
    opts = modeladmin.opts
    changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    movable = bulk.movable(queryset, move.bulk_name)
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"{move.label} everything this filter matches?",
        "opts": opts,
        "label": move.label,
        "warning": move.confirm_warning,
        "hint": move.hint,
        "movable": count_rows(movable),
        "matching": count_rows(queryset),
        "filters": filter_description(request),
        "batch_size": bulk.BATCH_SIZE,
        "sample": list(movable.order_by("-seq")[:SAMPLE_ROWS]),
        "echoed": echoed_fields(request),
        "confirmed_field": CONFIRMED_FIELD,
        "confirmed_value": PREFIX + move.name,
        "back_url": request.META.get("HTTP_REFERER") or changelist,
        "changelist_url": changelist,
    }
    return TemplateResponse(request, "admin/django_ojs/confirm_filter_wide.html", context)


def _log(modeladmin: admin.ModelAdmin, request: HttpRequest, move: JobMove, report: bulk.BulkReport) -> None:
    filters = ", ".join(f"{name}={value}" for name, value in filter_description(request)) or "no filter"
    user_id = request.user.pk
    assert user_id is not None, "the admin serves signed-in staff only"
    LogEntry.objects.create(
        user_id=user_id,
        content_type_id=ContentType.objects.get_for_model(modeladmin.model, for_concrete_model=False).pk,
        object_id=None,
        object_repr=f"{report.moved} jobs matching {filters}"[:200],
        action_flag=move.log_flag,
        change_message=f"{move.label} everything matching the filter (admin action): {message(move, report)}",
    )
