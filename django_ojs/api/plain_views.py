"""The hot endpoints' POST (PUSH, FETCH, ACK) as a plain Django view: DRF's machinery is not free.

A worker's ACK or a producer's PUSH is a few hundred microseconds of work
around one SQL statement; DRF's Request and Response objects, content
negotiation, the permission and throttle loops and the template-response
rendering around it cost about as much again (docs/explanation/performance.md). The
view served lean is still an ``OJSView`` (an ``AnsweringView``), and everything that decides what
the client gets is shared with it, not copied:

- the request id, the OJS-Version check and the query-string check
  (``base.request_id_of``, ``check_version``, ``check_query``);
- the API key and the scope (``auth.authenticated_key``, ``check_scope``):
  the same key cache, ``last_used_at`` writes and 401/403 bodies;
- the body: the view's parsers, chosen by DRF's own content negotiator
  from the same Content-Type, with the view's size limit and storability
  check (``media.OJSParser.parse``);
- the work: the view's ``answer(body)``, which its DRF ``post`` calls too;
- every error: ``errors.error_reply``, the function DRF's exception handler
  calls; the rendering: ``media.render_json``.

Any other method (a 405 before credentials or body, OPTIONS) goes to the
view's DRF form unchanged. tests/api/test_lean.py sends the same requests to
both forms and compares status, headers and bodies.
"""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from rest_framework import exceptions

from ..conf import ojs_settings
from .auth import ApiKeyAuthentication, ApiKeyUser, HasScope, authenticated_key, check_scope
from .base import (
    OJS_VERSION,
    AnsweringView,
    Reply,
    check_length,
    check_query,
    check_version,
    json_object,
    request_id_of,
)
from .errors import error_reply, logged_if
from .media import render_json


class LeanPost:
    """The view ``view_class``, its POST answered without DRF's request and response handling."""

    csrf_exempt = True  # as DRF's as_view() makes every APIView: API keys, not cookies

    def __init__(self, view_class: type[AnsweringView]):
        self.view_class = view_class
        self.drf_view = view_class.as_view()
        # Stateless, so made once, not per request as DRF does.
        template = view_class()
        self.negotiator, self.parsers = template.get_content_negotiator(), template.get_parsers()
        # What DRF's finalize_response puts on every response of the view.
        self.allow = ", ".join(template.allowed_methods)
        # A project that adds DRF throttles (DEFAULT_THROTTLE_CLASSES) or its
        # own authentication or permissions to the OJS views keeps DRF's path:
        # this one knows only the stock API keys and scopes.
        self.lean = (
            not view_class.throttle_classes
            and list(view_class.authentication_classes) == [ApiKeyAuthentication]
            and list(view_class.permission_classes) == [HasScope]
        )

    def __call__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "POST" or not self.lean:
            return self.drf_view(request, *args, **kwargs)
        request_id = request_id_of(request.META)
        view = self.view_class(request=request, args=args, kwargs=kwargs)
        logged = False
        try:
            # In the order OJSView.initial checks them.
            check_version(request.META)
            check_length("POST", request.META)
            key = authenticated_key(request.META)
            # As DRF leaves it on the request, for whatever reads request.user after the view.
            request.user = ApiKeyUser(key) if key is not None else AnonymousUser()  # type: ignore[assignment]
            check_scope(key, view.required_scope, "POST")
            check_query(request.GET)
            reply = view.answer(json_object(parsed_body(view, request, self.negotiator, self.parsers)))
        except Exception as exc:
            error = error_reply(exc, request_id, f"POST {request.path}")
            reply, logged = Reply(error.body, error.status, error.headers), error.logged
        response = HttpResponse(render_json(reply.data), status=reply.status,
                                content_type=ojs_settings.RESPONSE_MEDIA_TYPE)
        for name, value in reply.headers.items():
            response[name] = value
        response["Allow"] = self.allow
        response["OJS-Version"] = OJS_VERSION
        response["X-Request-Id"] = request_id
        return logged_if(response, logged)


def parsed_body(view: AnsweringView, request: HttpRequest, negotiator: Any, parsers: list[Any]) -> Any:
    """The request body, parsed as DRF's ``Request.data`` parses it for ``view``.

    No Content-Length (or 0): ``{}``. Otherwise the parser DRF's negotiator
    (``negotiator``) picks among the view's ``parsers`` for the Content-Type
    (none: 415's mapped error), given the view as
    its context, so the view's size limit and ``admit_body`` apply and
    ``view.body_size`` is set.
    """
    meta = request.META
    try:
        length = int(meta.get("CONTENT_LENGTH", meta.get("HTTP_CONTENT_LENGTH", 0)))
    except (ValueError, TypeError):
        length = 0
    if length == 0:
        return {}
    content_type = meta.get("CONTENT_TYPE", meta.get("HTTP_CONTENT_TYPE", ""))
    # The negotiator reads only the request's content_type: DRF's Request gives the full header.
    shim: Any = SimpleNamespace(content_type=content_type)
    parser = negotiator.select_parser(shim, parsers)
    if parser is None:
        raise exceptions.UnsupportedMediaType(content_type)
    # As DRF's Request._load_stream: the request itself, unless something read it already.
    stream: Any = io.BytesIO(request.body) if request._read_started else request  # type: ignore[attr-defined]
    return parser.parse(stream, content_type, {"view": view, "request": request})
