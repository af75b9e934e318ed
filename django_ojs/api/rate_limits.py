"""Rate limit inspection, override and listing (ojs-rate-limiting §10), and its headers (§10.4).

These are this server's job rate limits (per key, enforced at FETCH); the
API itself does not limit requests. A FETCH that limits held back carries
the §10.4 headers describing the limit that allows the next start soonest.
"""

from __future__ import annotations

import math
from typing import Any

from rest_framework.response import Response

from ..core import limits
from ..keys import INSPECT
from ..protocol.durations import parse_timestamp
from ..protocol.errors import InvalidRequest, NotFound
from ..protocol.ratelimit import KEY_PATTERN, MAX_KEY_LENGTH, parse_limit_fields
from .base import OJSView
from .pagination import page_of

OVERRIDE_FIELDS = ("concurrency", "rate", "throttle")


def limit_headers(report: limits.LimitReport) -> dict[str, str]:
    """X-RateLimit-Limit/-Remaining/-Reset and Retry-After, when a limit held jobs back."""
    if report.key is None:
        return {}
    headers = {"X-RateLimit-Key": report.key, "X-RateLimit-Remaining": str(report.remaining or 0)}
    if report.limit is not None:
        headers["X-RateLimit-Limit"] = str(report.limit)
    if report.reset_at is not None:
        headers["X-RateLimit-Reset"] = str(math.ceil(report.reset_at.timestamp()))
        # Whole seconds, rounded up: HTTP's delay-seconds (RFC 9110 §10.2.3) has no fraction, and
        # typed clients' parsers refuse one (decisions.md).
        headers["Retry-After"] = str(math.ceil(report.seconds_to_wait(0.0)))
    return headers


def _key(raw: str) -> str:
    if len(raw) > MAX_KEY_LENGTH or not KEY_PATTERN.fullmatch(raw):
        raise InvalidRequest(f"key must match {KEY_PATTERN.pattern} (at most {MAX_KEY_LENGTH} characters)", field="key")
    return raw


class RateLimitListView(OJSView):
    required_scope = INSPECT

    def get(self, request: Any) -> Response:
        page = page_of(request.query_params)
        everything = limits.keys()
        chosen = everything[page.offset : page.offset + page.limit]
        items = [item for item in (limits.inspect(key) for key in chosen) if item is not None]
        has_more = page.offset + page.limit < len(everything)
        return Response({"items": items, "rate_limits": items, "pagination": page.meta(has_more, len(everything))})


class RateLimitView(OJSView):
    required_scope = {"GET": INSPECT, "PUT": "admin", "DELETE": "admin"}

    def get(self, request: Any, key: str) -> Response:
        state = limits.inspect(_key(key))
        if state is None:
            raise NotFound(f"no rate limit applies to key {key!r}", details={"resource_type": "rate_limit", "resource_id": key})
        return Response(state)

    def put(self, request: Any, key: str) -> Response:
        key = _key(key)
        body = self.body()
        unknown = sorted(set(body) - {*OVERRIDE_FIELDS, "expires_at"})
        if unknown:
            raise InvalidRequest(f"unknown fields: {', '.join(unknown)}", field=unknown[0])
        override = {name: body[name] for name in OVERRIDE_FIELDS if name in body}
        if not override:
            raise InvalidRequest("give at least one of concurrency, rate, throttle", field="concurrency")
        parse_limit_fields(override, "", key=key)  # validates; null clears that kind
        expires_at = None
        if body.get("expires_at") is not None:
            try:
                expires_at = parse_timestamp(body["expires_at"], allow_relative=False)
            except ValueError as exc:
                raise InvalidRequest(f"expires_at: {exc}", field="expires_at") from None
        limits.set_override(key, override, expires_at)
        return Response(limits.inspect(key))

    def delete(self, request: Any, key: str) -> Response:
        if not limits.clear_override(_key(key)):
            raise NotFound(f"no override for key {key!r}", details={"resource_type": "rate_limit_override", "resource_id": key})
        return Response({"key": key, "override": None})
