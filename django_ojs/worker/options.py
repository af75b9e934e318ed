"""Python-friendly enqueue options -> the OJS envelope ``parse_job`` validates (pure).

``enqueue`` accepts what a Python caller has at hand -- ``timedelta`` for
durations, aware ``datetime`` for timestamps -- and turns it into the JSON
spelling of the envelope, so the in-process door validates exactly as the
HTTP door does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..durations import format_timestamp
from ..envelope import JobSpec, parse_job
from ..errors import InvalidRequest, OJSError
from ..retry import RetryPolicy, parse_policy

# Options that are attributes of the envelope itself rather than of "options".
_TOP_LEVEL = frozenset({"id", "meta", "schema"})


def _jsonable(name: str, value: Any) -> Any:
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise InvalidRequest(f"{name} must be a timezone-aware datetime", field=name)
        return format_timestamp(value)
    if name == "id" and value is not None:
        return str(value)
    return value


@dataclass(frozen=True)
class Defaults:
    """What a job gets when neither the caller nor its handler says: read once per batch."""

    queue: str
    retry: RetryPolicy

    @classmethod
    def from_settings(cls) -> Defaults:
        from ..conf import ojs_settings

        return cls(
            queue=ojs_settings.DEFAULT_QUEUE,
            retry=parse_policy(ojs_settings.DEFAULT_RETRY or None, field="OJS['DEFAULT_RETRY']"),
        )


def job_body(
    job_type: str,
    args: Sequence[Any],
    options: Mapping[str, Any],
    *,
    defaults: Defaults | None = None,
    where: str = "",
) -> JobSpec:
    """Validate one job; ``options`` use the names of the envelope's ``options``."""
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise InvalidRequest("args must be a list of JSON values", field="args")
    body: dict[str, Any] = {"type": job_type, "args": list(args), "options": {}}
    for name, value in options.items():
        if value is None:
            continue
        converted = _jsonable(name, value)
        if name in _TOP_LEVEL:
            body[name] = converted
        else:
            body["options"][name] = converted
    defaults = defaults or Defaults.from_settings()
    try:
        return parse_job(body, default_queue=defaults.queue, default_retry=defaults.retry)
    except OJSError as exc:
        if where:
            exc.message = f"{where}: {exc.message}"
            exc.args = (exc.message,)
        raise
