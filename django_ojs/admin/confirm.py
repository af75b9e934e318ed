"""The "are you sure?" page of an action that cannot be undone.

It lists what is selected and posts the same selection back (the action,
the ticked rows, "select all across pages") with the confirmation field
set, to the same address: the changelist with its filters, or a job page's
button.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

from ..core.counting import count_rows
from .outcome import ACTION_LIMIT

CONFIRMED_FIELD = "confirmed"
SAMPLE_ROWS = 20
_ECHOED_FIELDS = ("action", "_selected_action", "select_across", "index")


def confirmation_page(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    label: str,
    warning: str,
    action_name: str,
) -> TemplateResponse:
    opts = modeladmin.opts
    changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"{label}: are you sure?",
        "opts": opts,
        "label": label,
        "warning": warning,
        "selected": count_rows(queryset, ACTION_LIMIT),
        "action_limit": ACTION_LIMIT,
        "sample": list(queryset[:SAMPLE_ROWS]),
        "echoed": echoed_fields(request),
        "confirmed_field": CONFIRMED_FIELD,
        "action_name": action_name,
        "back_url": request.META.get("HTTP_REFERER") or changelist,
        "changelist_url": changelist,
    }
    return TemplateResponse(request, "admin/django_ojs/confirm_action.html", context)


def echoed_fields(request: HttpRequest) -> list[tuple[str, str]]:
    """The action's own form fields, to post the same selection back once confirmed."""
    return [(name, value) for name in _ECHOED_FIELDS for value in request.POST.getlist(name)]
