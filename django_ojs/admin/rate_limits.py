"""Rate limits: every limited key (job keys and queues) with its usage now, and overrides.

The page lists the keys ``core.limits.keys()`` finds -- live jobs' keys,
queues with limits, overrides -- each with what ``core.limits.inspect``
reports: active / concurrency, starts in the window / rate, the next start
a throttle allows, jobs waiting. An operator sets a temporary override
(e.g. concurrency 0 while a downstream API is down) or clears one; both go
through the core. ``?key=`` shows one key.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.dateparse import parse_datetime

from ..core import limits
from ..core.clock import db_now
from ..models import RateLimitOverride
from ..protocol.errors import OJSError
from ..protocol.ratelimit import KEY_PATTERN, parse_limit_fields
from .base import ConsoleAdmin
from .display import moment

PAGE_SIZE = 100


class OverrideForm(forms.Form):
    key = forms.RegexField(regex=KEY_PATTERN, max_length=255, help_text="A job key, or queue:<name> for a queue.")
    concurrency = forms.IntegerField(required=False, min_value=0, help_text="0 stops the key's jobs from starting.")
    rate_limit = forms.IntegerField(required=False, min_value=1, label="rate: starts")
    rate_period = forms.CharField(required=False, initial="PT1M", label="per (ISO 8601)")
    expires_at = forms.DateTimeField(required=False, help_text="UTC, e.g. 2026-02-13 13:00:00Z; empty: until cleared.")

    def overrides(self) -> dict[str, Any]:
        data = self.cleaned_data
        out: dict[str, Any] = {}
        if data["concurrency"] is not None:
            out["concurrency"] = data["concurrency"]
        if data["rate_limit"] is not None:
            out["rate"] = {"limit": data["rate_limit"], "period": data["rate_period"] or "PT1M"}
        if not out:
            raise forms.ValidationError("Give a concurrency or a rate.")
        try:
            parse_limit_fields(out, "override", key=data["key"])
        except OJSError as exc:
            raise forms.ValidationError(exc.message) from None
        return out


@admin.register(RateLimitOverride)
class RateLimitAdmin(ConsoleAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        can_change = self.has_change_permission(request)
        form = OverrideForm(request.POST or None, initial={"key": request.GET.get("key", "")})
        if request.method == "POST":
            if not can_change:
                raise PermissionDenied
            if "clear" in request.POST:
                return self._clear(request, request.POST["clear"])
            if form.is_valid():
                try:
                    overrides = form.overrides()
                except forms.ValidationError as exc:
                    form.add_error(None, exc)
                else:
                    limits.set_override(form.cleaned_data["key"], overrides, form.cleaned_data["expires_at"])
                    messages.success(request, f"Override of {form.cleaned_data['key']}: done.")
                    return HttpResponseRedirect(request.get_full_path())
        only = request.GET.get("key")
        keys = [only] if only else limits.keys()[:PAGE_SIZE]
        now = db_now()
        rows = [_shown(state, now) for state in (limits.inspect(key) for key in keys) if state is not None]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Rate limits" + (f": {only}" if only else ""),
            "rows": rows,
            "form": form if can_change else None,
            "truncated": not only and len(keys) == PAGE_SIZE,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/django_ojs/ratelimit/list.html", context)

    def _clear(self, request: HttpRequest, key: str) -> HttpResponse:
        if limits.clear_override(key):
            messages.success(request, f"Clear override of {key}: done.")
        else:
            messages.warning(request, f"Clear override of {key}: 0 done, 1 skipped because: no override.")
        return HttpResponseRedirect(reverse("admin:django_ojs_ratelimitoverride_changelist"))


def _shown(state: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """A key's state as ``limits.inspect`` gives it (the API's shape), with its times as the console shows them."""
    throttle_next = (state.get("throttle") or {}).get("next_allowed_at")
    return {
        **state,
        "throttle_next": moment(parse_datetime(throttle_next), now) if throttle_next else None,
        "retry_moment": moment(parse_datetime(state["retry_at"]), now) if state.get("retry_at") else None,
    }
