"""API keys for the HTTP binding: create (the secret is shown once), revoke, last used.

The store keeps only a key's SHA-256 digest, so the page that creates a key
is the only place its secret ever appears: it is rendered in the response to
the form, never put in a message or a redirect, and marked not to be cached.
Keys are revoked, not deleted, so the list keeps telling who had access.
"""

from __future__ import annotations

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

from ..keys import SCOPES
from ..models import ApiKey
from .base import ConsoleAdmin
from .display import moment, moment_field
from .outcome import Outcome, apply_to_each

SCOPE_HELP = (
    "read: listings and statistics. enqueue: push, cancel, activate. "
    "worker: fetch, ack, fail, heartbeat. admin: everything, including dead letter and queue control."
)


class ApiKeyCreationForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="Who or what will use the key, e.g. “billing service”.")
    scopes = forms.MultipleChoiceField(
        choices=[(scope, scope) for scope in SCOPES], widget=forms.CheckboxSelectMultiple, help_text=SCOPE_HELP
    )


class ActiveFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("active", "revoked"):
            return queryset.filter(revoked_at__isnull=self.value() == "active")
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(ConsoleAdmin):
    list_display = ("name", "key_prefix", "scope_list", "status", "created", "last_used")
    list_filter = (ActiveFilter,)
    list_title = "API keys"
    search_fields = ("name", "prefix")
    ordering = ("-created_at",)
    fields = ("name", "key_prefix", "scope_list", "status", "created", "last_used")
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
        if key.revoked_at is None:
            return format_html('<span class="ojs-running">{}</span>', "active")
        return format_html('<span class="ojs-paused">revoked</span> {}', moment(key.revoked_at, timezone.now()))

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
        key, secret = ApiKey.objects.issue(form.cleaned_data["name"], form.cleaned_data["scopes"])
        self.log_addition(request, key, "Created in the admin")
        context.update(title="API key created", key=key, secret=secret)
        response = TemplateResponse(request, "admin/django_ojs/apikey/created.html", context)
        add_never_cache_headers(response)
        return response
