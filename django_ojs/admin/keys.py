"""API keys for the HTTP binding: create (the secret is shown once), revoke, last used, expiry.

The store keeps only a key's SHA-256 digest, so the page that creates a key
is the only place its secret ever appears: it is rendered in the response to
the form, never put in a message or a redirect, and marked not to be cached.
Keys are revoked, not deleted, so the list keeps telling who had access.
"""

from __future__ import annotations

import datetime as dt

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..keys import (
    ACTIVE,
    ADMIN_WARNING,
    EXPIRED,
    REVOKED,
    SCOPES,
    SCOPES_EXPLAINED,
    parse_lifetime,
    status_filter,
)
from ..models import ApiKey
from .base import ConsoleAdmin
from .display import moment, moment_field
from .outcome import Outcome, apply_to_each


class ApiKeyCreationForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="Who or what will use the key, e.g. “billing service”.")
    scopes = forms.MultipleChoiceField(
        choices=[(scope, scope) for scope in SCOPES], widget=forms.CheckboxSelectMultiple, help_text=SCOPES_EXPLAINED
    )
    expires_in = forms.CharField(
        required=False, max_length=32, label="Expires in",
        help_text="e.g. 90d, 12h or P30D; requests with the key are refused from then on. Empty: never.",
    )
    admin_confirmed = forms.BooleanField(
        required=False, label="I mean an admin key", help_text="Needed with the admin scope, which a service never needs."
    )

    def clean_expires_in(self) -> dt.timedelta | None:
        text = self.cleaned_data["expires_in"].strip()
        try:
            return parse_lifetime(text) if text else None
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        if "admin" in cleaned.get("scopes", ()) and not cleaned.get("admin_confirmed"):
            self.add_error("admin_confirmed", ADMIN_WARNING + " Tick the box to create it.")
        return cleaned


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(status, status) for status in (ACTIVE, EXPIRED, REVOKED)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        status = self.value()
        if status in (ACTIVE, EXPIRED, REVOKED):
            return queryset.filter(status_filter(status, timezone.now()))
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(ConsoleAdmin):
    list_display = ("name", "key_prefix", "scope_list", "status", "expires", "created", "last_used")
    list_filter = (StatusFilter,)
    list_title = "API keys"
    search_fields = ("name", "prefix")
    ordering = ("-created_at",)
    fields = ("name", "key_prefix", "scope_list", "status", "expires", "created", "last_used")
    readonly_fields = fields
    actions = ("revoke_keys",)

    created = moment_field("created_at", "created")

    @admin.display(description="key")
    def key_prefix(self, key: ApiKey) -> SafeString:
        return format_html("<code>{}…</code>", key.prefix)

    @admin.display(description="scopes")
    def scope_list(self, key: ApiKey) -> str:
        return ", ".join(key.scopes)

    @admin.display(description="status")
    def status(self, key: ApiKey) -> SafeString:
        now = timezone.now()
        status = key.status(now)
        if status == ACTIVE:
            return format_html('<span class="ojs-running">{}</span>', status)
        since = key.revoked_at if status == REVOKED else key.expires_at
        return format_html('<span class="ojs-paused">{}</span> {}', status, moment(since, now))

    @admin.display(description="expires", ordering="expires_at")
    def expires(self, key: ApiKey) -> SafeString | str:
        return moment(key.expires_at, timezone.now(), compact=True) if key.expires_at else "never"

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, key: ApiKey) -> SafeString | str:
        # The API refreshes it at most once a minute per key (api/auth.py).
        return moment(key.last_used_at, timezone.now()) if key.last_used_at else "never"

    @admin.action(description="Revoke selected keys (requests with them are refused from now on)", permissions=["change"])
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet) -> None:
        apply_to_each(
            request, queryset, Outcome("Revoke"), lambda key: bool(ApiKey.objects.revoke([key.pk])),
            skipped="already revoked", missing="no longer listed",
        )

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: dict | None = None) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = ApiKeyCreationForm(request.POST if request.method == "POST" else None)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Create an API key",
            "form": form,
        }
        if not form.is_valid():
            return TemplateResponse(request, "admin/django_ojs/apikey/create.html", context)
        key, secret = ApiKey.objects.issue(
            form.cleaned_data["name"], form.cleaned_data["scopes"], expires_in=form.cleaned_data["expires_in"]
        )
        self.log_addition(request, key, "Created in the admin")
        context.update(title="API key created", key=key, secret=secret, expires=key.expires_at and moment(key.expires_at, timezone.now()))
        response = TemplateResponse(request, "admin/django_ojs/apikey/created.html", context)
        add_never_cache_headers(response)
        return response
