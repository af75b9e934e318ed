"""CORS for browser dashboards (binding §20): every OJS route, wrapped in one place by ``api/urls.py``.

Off unless ``OJS["CORS_ALLOWED_ORIGINS"]`` names origins. For a request whose
``Origin`` is one of them:

- a preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is answered
  here, 204 with the allowed methods, headers and max-age, before any view:
  browsers send no credentials with a preflight, so it needs no API key;
- any other response gets ``Access-Control-Allow-Origin: <that origin>`` and
  ``Access-Control-Expose-Headers``, so the page's script may read it.

Another origin gets no CORS header (its browser withholds the answer); the
request itself is served as without CORS. Never ``*`` (§20.3): every endpoint
but health and the manifest needs a key, and the settings check refuses it.
No ``Access-Control-Allow-Credentials``: a dashboard sends its key in the
``Authorization`` header it sets itself, which is no credential in the CORS
sense (cookies), so the console's session cookie never reaches the API this way.
"""

from __future__ import annotations

import functools
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver
from django.utils.cache import patch_vary_headers

from ..conf import ojs_settings
from .base import request_id_of
from .errors import OJS_VERSION

# Every method a route serves (a test compares it with the routes).
ALLOW_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
# §20.2's list: every request header the API reads, beyond the CORS-safelisted ones.
ALLOW_HEADERS = "Content-Type, Accept, Authorization, X-Request-Id, OJS-Version"
# Every response header the API sends that a script reads (§20.2's list and the rest the API sends).
EXPOSE_HEADERS = ("X-Request-Id, OJS-Version, Retry-After, Location, X-RateLimit-Limit, X-RateLimit-Remaining, "
                  "X-RateLimit-Reset, X-RateLimit-Key, X-OJS-Progress, WWW-Authenticate")
# §20.2: a browser may keep a preflight's answer a day.
MAX_AGE = "86400"


def allowed_origin(request: HttpRequest, allowed: list[str]) -> str | None:
    """The request's ``Origin`` when it is one of ``allowed``, else None."""
    origin = request.META.get("HTTP_ORIGIN", "")
    # Scheme and host are case-insensitive; a browser sends them in lowercase.
    return origin if origin and origin.lower() in {each.lower() for each in allowed} else None


def cross_origin(view: Any) -> Any:
    """``view``, answering preflights of allowed origins and marking its responses for them."""

    @functools.wraps(view)
    def served(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        allowed = ojs_settings.CORS_ALLOWED_ORIGINS
        if not allowed:
            return view(request, *args, **kwargs)
        origin = allowed_origin(request, allowed)
        if origin and request.method == "OPTIONS" and "HTTP_ACCESS_CONTROL_REQUEST_METHOD" in request.META:
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Origin"] = origin
            response["Access-Control-Allow-Methods"] = ALLOW_METHODS
            response["Access-Control-Allow-Headers"] = ALLOW_HEADERS
            response["Access-Control-Max-Age"] = MAX_AGE
            # The headers every answer of the API carries (binding §6.5), this one answered before any view.
            response["OJS-Version"] = OJS_VERSION
            response["X-Request-Id"] = request_id_of(request.META)
        else:
            response = view(request, *args, **kwargs)
            if origin:
                response["Access-Control-Allow-Origin"] = origin
                response["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
        # The answer depends on the Origin once any is allowed: a cache must not give
        # one origin's answer (with or without the header) to another.
        patch_vary_headers(response, ["Origin"])
        return response

    # As the view was: DRF's as_view() and LeanPost exempt the API from CSRF (keys, not cookies).
    served.csrf_exempt = getattr(view, "csrf_exempt", False)  # type: ignore[attr-defined]
    return served


def served_cross_origin(patterns: list[Any]) -> list[Any]:
    """``patterns`` (and those of every include among them), each view wrapped by ``cross_origin``."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            served_cross_origin(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            pattern.callback = cross_origin(pattern.callback)
    return patterns
