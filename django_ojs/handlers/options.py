"""Python-friendly enqueue options -> the OJS envelope ``parse_job`` validates (pure).

``enqueue`` accepts what a Python caller has at hand -- ``timedelta`` for
durations, aware ``datetime`` for timestamps -- and turns it into the JSON
spelling of the envelope, so the in-process door validates exactly as the
HTTP door does.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from ..conf import ojs_settings
from ..protocol.durations import format_duration, format_timestamp
from ..protocol.envelope import JobSpec, parse_job
from ..protocol.errors import InvalidRequest, OJSError
from ..protocol.retry import RetryPolicy


class EnqueueOptions(TypedDict, total=False):
    """The job options ``handler.using(...)`` takes, typed for type checkers.

    The envelope's options (ojs-core §5, binding §9.1) with the Python types
    ``job_body`` converts: durations as seconds or ``timedelta``, timestamps
    as aware ``datetime`` or RFC 3339 strings. ``django_ojs.enqueue`` takes the
    same names untyped (an unknown option is kept as an extension, §5.3).
    """

    queue: str
    # ojs-core §5.2: an integer from -100 to 100, higher first (the envelope
    # refuses others); the named levels are 10, 0 and -10 (docs/explanation/decisions.md).
    priority: int | Literal["high", "normal", "low"]
    timeout: float | dt.timedelta
    timeout_ms: int
    visibility_timeout: float | dt.timedelta
    visibility_timeout_ms: int
    retry: Mapping[str, Any]
    # A timedelta means "this long from now" (by the database clock).
    scheduled_at: dt.datetime | dt.timedelta | str
    delay_until: dt.datetime | dt.timedelta | str
    expires_at: dt.datetime | dt.timedelta | str
    meta: Mapping[str, Any]
    tags: Sequence[str]
    unique: Mapping[str, Any]
    rate_limit: Mapping[str, Any]
    pending: bool
    id: str | uuid.UUID
    schema: str


# Options that are attributes of the envelope itself rather than of "options".
_TOP_LEVEL = frozenset({"id", "meta", "schema"})


# Timestamps: a timedelta there means "this long from now".
_TIMESTAMPS = frozenset({"scheduled_at", "expires_at", "delay_until"})


def _jsonable(name: str, value: Any) -> Any:
    if isinstance(value, dt.timedelta) and name in _TIMESTAMPS:
        if value < dt.timedelta(0):
            raise InvalidRequest(f"{name} as a timedelta must not be negative", field=name)
        # The wire's "+PT5M": resolved against the database clock, like every
        # other timestamp the store compares with.
        return "+" + format_duration(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise InvalidRequest(f"{name} must be a timezone-aware datetime", field=name)
        return format_timestamp(value)
    if name == "id" and value is not None:
        return str(value)
    return value


def wire_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Python options -> (top-level attributes, ``options``) as a PUSH body writes them."""
    top_level: dict[str, Any] = {}
    wire: dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            continue
        (top_level if name in _TOP_LEVEL else wire)[name] = _jsonable(name, value)
    return top_level, wire


@dataclass(frozen=True)
class Defaults:
    """What a job gets when neither the caller nor its handler says: read once per batch."""

    queue: str
    retry: RetryPolicy

    @classmethod
    def from_settings(cls) -> Defaults:
        return cls(
            queue=ojs_settings.DEFAULT_QUEUE,
            retry=ojs_settings.retry_policy(),
        )


def job_envelope(job_type: str, args: Sequence[Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON envelope of a job given with Python values (not yet validated)."""
    top_level, wire = wire_options(options)
    return {"type": job_type, "args": wire_args(args), **top_level, "options": wire}


def wire_args(args: Sequence[Any]) -> list[Any]:
    """A job's Python args as the envelope's list (not yet validated)."""
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise InvalidRequest("args must be a list of JSON values", field="args")
    return list(args)


def job_body(
    job_type: str,
    args: Sequence[Any],
    options: Mapping[str, Any],
    *,
    defaults: Defaults | None = None,
    where: str = "",
) -> JobSpec:
    """Validate one job; ``options`` use the names of the envelope's ``options``."""
    body = job_envelope(job_type, args, options)
    defaults = defaults or Defaults.from_settings()
    try:
        return parse_job(body, default_queue=defaults.queue, default_retry=defaults.retry)
    except OJSError as exc:
        if where:
            exc.message = f"{where}: {exc.message}"
            exc.args = (exc.message,)
        raise
