"""A cron job's registration: its validated form and the requests that make one (ojs-cron §2, §8; pure).

Both request shapes are accepted: openapi's ``expression`` + ``job_template``
(what the conformance cases send) and the binding's and ojs-cron's ``cron`` +
flat ``type``/``args``/``options``. The same parser reads ``OJS["CRON"]``
entries, so a schedule declared in settings is checked exactly as one
registered over HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .cron import CronError, parse_schedule, validate_timezone
from .envelope import parse_job
from .errors import InvalidRequest, OJSError

OVERLAP_POLICIES = frozenset({"skip", "allow", "cancel_previous", "enqueue"})
OVERLAP_ALIASES = {"cancel": "cancel_previous"}  # openapi spells it "cancel"
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9\-\.]*")  # ojs-cron §2.2, with fullmatch()


@dataclass(frozen=True)
class CronSpec:
    """A validated registration."""

    name: str
    expression: str
    timezone: str
    job_template: dict[str, Any]
    overlap_policy: str = "skip"
    enabled: bool = True
    description: str = ""


class CodeScheduleError(ValueError):
    """A schedule declared in code is invalid."""


def validate_template(template: object) -> dict[str, Any]:
    """The job each occurrence enqueues must itself be a valid PUSH body."""
    if not isinstance(template, Mapping):
        raise InvalidRequest("job_template must be an object with type and args", field="job_template")
    if template.get("id") is not None:
        raise InvalidRequest("a cron job template cannot fix the job id", field="job_template.id")
    body = {"args": [], **template}
    parse_job(body, path="job_template.")
    return dict(body)


def validate_cron(expression: object, timezone: object) -> None:
    try:
        validate_timezone(timezone)
        parse_schedule(expression)
    except CronError as exc:
        raise InvalidRequest(str(exc), field="expression") from None


def validate_cron_name(value: Any, where: str = "name") -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value) or len(value) > 255:
        raise InvalidRequest(
            f"{where} must be lowercase letters, digits, '-' and '.', starting with a letter or digit "
            "(at most 255 characters)",
            field=where,
        )
    return value


def parse_cron_request(body: Mapping[str, Any]) -> CronSpec:
    name = validate_cron_name(body.get("name"))
    expression = body.get("expression", body.get("cron"))
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidRequest("expression (or cron) must be a cron expression such as '0 9 * * *'",
                             field="expression")
    timezone = body.get("timezone", "UTC")
    validate_cron(expression, timezone)
    template = body.get("job_template")
    if template is None:
        template = {key: body[key] for key in ("type", "args", "meta", "options") if key in body}
    policy = body.get("overlap_policy", "skip")
    if isinstance(policy, str):
        policy = OVERLAP_ALIASES.get(policy, policy)
    if not isinstance(policy, str) or policy not in OVERLAP_POLICIES:
        raise InvalidRequest(
            f"overlap_policy must be one of {', '.join(sorted(OVERLAP_POLICIES))}", field="overlap_policy"
        )
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        raise InvalidRequest("enabled must be true or false", field="enabled")
    description = body.get("description") or ""
    if not isinstance(description, str):
        raise InvalidRequest("description must be a string", field="description")
    return CronSpec(
        name=name,
        expression=expression.strip(),
        timezone=timezone,
        job_template=validate_template(template),
        overlap_policy=policy,
        enabled=enabled,
        description=description,
    )


def schedule_from_setting(item: Any) -> CronSpec:
    """One ``OJS["CRON"]`` entry as a validated registration."""
    if not isinstance(item, Mapping):
        raise CodeScheduleError("must be a dict shaped like a cron registration (name, cron, type, args, ...)")
    try:
        return parse_cron_request(item)
    except OJSError as exc:
        raise CodeScheduleError(f"{item.get('name', '?')}: {exc.message}") from None
