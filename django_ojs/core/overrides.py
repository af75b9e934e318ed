"""Operators' temporary overrides of limits (ojs-rate-limiting §10.2), as FETCH and the queue settings read them.

An override replaces the parts of a key's limit it names (concurrency,
rate, throttle) until it expires by the database clock; an override of a
key nothing limits makes a limit of its own.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from ..models import RateLimitOverride
from ..protocol.ratelimit import Limit, parse_limit_fields
from .clock import TxNow


def with_overrides(limits: dict[str, Limit]) -> dict[str, Limit]:
    """Lay each key's unexpired operator override over its limit."""
    if not limits:
        return limits
    rows = RateLimitOverride.objects.filter(key__in=list(limits)).filter(in_force())
    out = dict(limits)
    for row in rows:
        out[row.key] = overridden(out[row.key], row.limits)
    return out


def with_override(key: str, limit: Limit | None) -> Limit | None:
    """One key's limit with its override, if any; an override alone makes a limit."""
    row = RateLimitOverride.objects.filter(key=key).filter(in_force()).first()
    if row is None:
        return limit
    return overridden(limit or Limit(key=key), row.limits)


def in_force() -> Q:
    """An override not expired by the database clock, read in the same statement (no round trip for it)."""
    return Q(expires_at__isnull=True) | Q(expires_at__gt=TxNow())


def overridden(limit: Limit, stored: dict[str, Any]) -> Limit:
    parsed = parse_limit_fields(stored, "override", key=limit.key)
    return limit.overridden({name: getattr(parsed, name) for name in stored})
