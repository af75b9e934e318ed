"""What every page of the console shares."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest


class ConsoleAdmin(admin.ModelAdmin):
    """Read-only object pages, no bare deletes, no facet counts, the console's stylesheet and copy buttons.

    A row changes only through the actions, which call the core: an object
    page never saves (``has_change_permission`` is False for an object, so
    it renders read-only), and nothing is deleted by the admin's generic
    DELETE. Without an object, the change permission is what the actions
    require. Facet counts are off: each would COUNT every filter choice over
    the whole job table.
    """

    show_facets = admin.ShowFacets.NEVER
    # The list page's heading, instead of Django's "Select … to change".
    list_title = ""

    class Media:
        css = {"all": ["django_ojs/admin/ojs.css"]}
        js = ["django_ojs/admin/copy.js"]

    @property
    def urls(self) -> list[Any]:
        # Every page of the console, its own views included, refuses a NUL before reading.
        patterns = self.get_urls()
        for pattern in patterns:
            pattern.callback = refusing_nul(pattern.callback)
        return patterns

    def response_action(self, request: HttpRequest, queryset: QuerySet, *args: Any, **kwargs: Any) -> HttpResponse | None:
        # Ticked rows are primary keys: one that is none (a job's UUID where its seq is asked)
        # failed the action's query, a 500; it is a refusal before anything runs.
        primary_key = self.model._meta.pk
        assert primary_key is not None, "every page lists a model with a primary key"
        try:
            for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
                primary_key.to_python(value)
        except ValidationError:
            return HttpResponseBadRequest("A ticked row is not a row of this list.", content_type="text/plain")
        # Django 6.1 passes where the action was chosen (action_location); earlier versions do not.
        return super().response_action(request, queryset, *args, **kwargs)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        title = {"title": self.list_title} if self.list_title else {}
        return super().changelist_view(request, {**title, **(extra_context or {})})


def refusing_nul(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view``, answering 400 to a request whose path, query or form holds a NUL character.

    PostgreSQL stores no NUL in text: a filter (``?queue=%00``), a search or an
    id holding one made the query fail, a 500 instead of a refusal.
    """

    @functools.wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        given = [*args, *kwargs.values(), *request.GET.keys(), *request.POST.keys()]
        given += [value for values in (*request.GET.lists(), *request.POST.lists()) for value in values[1]]
        if any("\x00" in str(value) for value in given):
            return HttpResponseBadRequest("A NUL character is not allowed here.", content_type="text/plain")
        return view(request, *args, **kwargs)

    return checked
