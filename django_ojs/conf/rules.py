"""What each ``OJS`` setting may hold (pure): types and ranges, checked by ``manage.py check``.

Every setting in ``conf.DEFAULTS`` has a rule here, so a new setting without
one fails ``tests/unit/test_setting_rules.py``. A rule returns the problem
with a value as a sentence, or None when the value is fine; its ``accepts``
names what it takes, as the settings reference's "type" column shows it.
Problems are reported, never repaired: a typo in a timeout should stop the
deploy, not run with a silently different number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..protocol.cron_jobs import CodeScheduleError, schedule_from_setting
from ..protocol.envelope import MAX_QUEUE_LENGTH, QUEUE_PATTERN
from ..protocol.errors import OJSError
from ..protocol.retry import parse_policy
from .defaults import DEFAULTS


@dataclass(frozen=True)
class Rule:
    """A check of one setting's value, and what it accepts in words (the settings reference's type)."""

    accepts: str
    check: Callable[[Any], str | None]
    # Seconds: the reference glosses long defaults ("604800 (7 days)").
    is_duration: bool = False
    # What a list of such values holds ("list of queue names"), when not ``accepts``.
    plural: str = ""

    def __call__(self, value: Any) -> str | None:
        return self.check(value)


def rule(accepts: str, plural: str = "") -> Callable[[Callable[[Any], str | None]], Rule]:
    """Make the decorated check a ``Rule`` accepting ``accepts``."""
    return lambda check: Rule(accepts, check, plural=plural)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@rule("bool")
def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be True or False"


@rule("str")
def text(value: Any) -> str | None:
    return None if isinstance(value, str) and value else "must be a non-empty string"


@rule("queue name", plural="queue names")
def queue_name(value: Any) -> str | None:
    if isinstance(value, str) and len(value) <= MAX_QUEUE_LENGTH and QUEUE_PATTERN.fullmatch(value):
        return None
    return "must be a queue name (lowercase letters, digits, '-' and '.')"


# scheme://host[:port], as a browser's Origin header: no path, no trailing slash, no wildcard.
_ORIGIN = re.compile(r"https?://[^/\s*?#@]+")


@rule("origin", plural="origins")
def origin(value: Any) -> str | None:
    if value == "*":
        return ("must not be '*': every endpoint but health and the manifest needs an API key, and the binding "
                "(§20.3) forbids a wildcard origin on authenticated endpoints; name each dashboard's origin")
    if isinstance(value, str) and _ORIGIN.fullmatch(value):
        return None
    return f"must be an origin such as 'https://dash.example.com' (scheme, host, port; no path), not {value!r}"


def count(minimum: int = 1) -> Rule:
    def check(value: Any) -> str | None:
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            return None
        return f"must be a whole number of at least {minimum}"

    return Rule(f"int ≥ {minimum}", check)


def seconds(*, zero_allowed: bool) -> Rule:
    def check(value: Any) -> str | None:
        if _is_number(value) and (value > 0 or (zero_allowed and value == 0)):
            return None
        return "must be a number of seconds, 0 or more" if zero_allowed else "must be a number of seconds above 0"

    return Rule("seconds ≥ 0" if zero_allowed else "seconds > 0", check, is_duration=True)


def strings(*, each: Rule = text, non_empty: bool = False) -> Rule:
    def check(value: Any) -> str | None:
        if not isinstance(value, (list, tuple)):
            return "must be a list"
        if non_empty and not value:
            return "must name at least one"
        for index, item in enumerate(value):
            problem = each(item)
            if problem:
                return f"[{index}] {problem}"
        return None

    return Rule(f"list of {each.plural or each.accepts}" + (", at least one" if non_empty else ""), check)


@rule("retry policy (dict)")
def retry_policy(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return "must be a retry policy (a dict)"
    try:
        parse_policy(dict(value) or None, field="OJS['DEFAULT_RETRY']")
    except OJSError as exc:
        return f"is not a valid retry policy: {exc.message}"
    return None


def retention_key(key: str) -> Rule:
    """The rule of one ``RETENTION`` entry: a count where the key says so, else seconds."""
    return count(0) if key.endswith("_count") else seconds(zero_allowed=True)


@rule("dict (keys below)")
def retention(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return "must be a dict"
    known = DEFAULTS["RETENTION"]
    for key, item in value.items():
        if key not in known:
            return f"has an unknown key {key!r} (known: {', '.join(sorted(known))})"
        problem = retention_key(key)(item)
        if problem:
            return f"[{key!r}] {problem}"
    return None


@rule("bool or database alias")
def listen_target(value: Any) -> str | None:
    """True, False, or the alias of a database in DATABASES (a direct connection for LISTEN)."""
    if isinstance(value, bool):
        return None
    if not isinstance(value, str) or not value:
        return "must be True, False or a database alias"
    from django.conf import settings

    if value not in settings.DATABASES:
        return f"names no database in DATABASES: {value!r}"
    return None


@rule("bool or None")
def optional_boolean(value: Any) -> str | None:
    """None (decided for you), True or False."""
    return None if value is None or isinstance(value, bool) else "must be None, True or False"


@rule("list of cron registrations (dict)")
def cron_entries(value: Any) -> str | None:
    if not isinstance(value, (list, tuple)):
        return "must be a list of schedules"
    names = set()
    for index, item in enumerate(value):
        try:
            spec = schedule_from_setting(item)
        except CodeScheduleError as exc:
            return f"[{index}] {exc}"
        if spec.name in names:
            return f"[{index}] repeats the name {spec.name!r}"
        names.add(spec.name)
    return None


RULES: dict[str, Rule] = {
    "AUTH_REQUIRED": boolean,
    "API_KEY_CACHE_SECONDS": seconds(zero_allowed=True),
    "RESPONSE_MEDIA_TYPE": text,
    "MAX_ENVELOPE_BYTES": count(1),
    "MAX_BATCH_SIZE": count(1),
    "MAX_BATCH_BYTES": count(1),
    "MAX_FETCH_COUNT": count(1),
    "PAGE_SIZE": count(1),
    "MAX_PAGE_SIZE": count(1),
    "DOCS_URL": text,
    "CORS_ALLOWED_ORIGINS": strings(each=origin),
    "DEFAULT_QUEUE": queue_name,
    "DEFAULT_TIMEOUT": seconds(zero_allowed=True),
    "DEFAULT_VISIBILITY_TIMEOUT": seconds(zero_allowed=False),
    "DEFAULT_RETRY": retry_policy,
    "EVENTS": boolean,
    "EVENTS_KEPT_WITH_JOB": boolean,
    "PREPARED_STATEMENTS": optional_boolean,
    "ONE_STATEMENT_PATHS": boolean,
    "METRICS": boolean,
    "TRACING": boolean,
    "HEARTBEAT_INTERVAL": seconds(zero_allowed=False),
    "HEARTBEAT_TIMEOUT": seconds(zero_allowed=False),
    "WORKER_CONCURRENCY": count(1),
    "WORKER_QUEUES": strings(each=queue_name, non_empty=True),
    "WORKER_LABELS": strings(),
    "SHUTDOWN_GRACE_PERIOD": seconds(zero_allowed=True),
    "POLL_INTERVAL": seconds(zero_allowed=False),
    "LISTEN": listen_target,
    "LISTEN_POLL_INTERVAL": seconds(zero_allowed=False),
    "ACK_BATCH_SIZE": count(1),
    "ACK_FLUSH_WINDOW": seconds(zero_allowed=False),
    "OMIT_BACKTRACES": boolean,
    "ENQUEUE_MIDDLEWARE": strings(),
    "EXECUTION_MIDDLEWARE": strings(),
    "REAPER_INTERVAL": seconds(zero_allowed=False),
    "CRON_INTERVAL": seconds(zero_allowed=False),
    "PRUNE_INTERVAL": seconds(zero_allowed=False),
    "REAPER_BATCH_SIZE": count(1),
    "RETENTION": retention,
    "HISTORY_PARTITION_DAYS": count(1),
    "ADMIN_SEARCH_META_KEYS": strings(),
    "TEST_HOOKS": boolean,
    "QUEUE_CONFIG_TTL": seconds(zero_allowed=True),
    "CRON": cron_entries,
    "PROGRESS_EVENT_INTERVAL": seconds(zero_allowed=True),
    "MAX_SNOOZES": count(0),
    "PROGRESS_STREAMS": count(1),
    "PROGRESS_STREAM_SECONDS": seconds(zero_allowed=False),
    "PROGRESS_STREAM_POLL_INTERVAL": seconds(zero_allowed=False),
    "RESULT_WAITS": count(1),
    "RESULT_WAIT_MAX_SECONDS": seconds(zero_allowed=False),
}


def problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(setting, problem)`` for every value a project set that breaks its rule."""
    found = []
    for name, value in values.items():
        rule = RULES.get(name)
        problem = rule(value) if rule else None
        if problem:
            found.append((name, problem))
    page, largest = values.get("PAGE_SIZE"), values.get("MAX_PAGE_SIZE")
    if isinstance(page, int) and isinstance(largest, int) and page > largest:
        found.append(("PAGE_SIZE", f"({page}) must not exceed MAX_PAGE_SIZE ({largest})"))
    return found
