"""Job envelopes in and out: validation on PUSH, rendering for every reply (pure).

``parse_job`` turns a PUSH body -- the HTTP binding's ``{type, args, meta,
options}`` or the core envelope's top-level attributes, with every alias the
documents and conformance cases use -- into a validated ``JobSpec``. Nothing
here touches the database: the core stores a ``JobSpec``; ``render_job``
turns a stored job (any object with the model's attributes) back into the
wire envelope.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .durable import render_checkpoint, render_step
from .durations import RelativeTime, format_timestamp, parse_duration, parse_timestamp, to_millis
from .errors import InvalidRequest, PayloadTooLarge
from .ratelimit import Limit, parse_job_limit
from .retry import DEFAULT_POLICY, RetryPolicy, parse_policy
from .states import JobState
from .unique import UniquePolicy, parse_unique

SPEC_VERSION = "1.0"

# ojs-core §5.1 requires `[a-z][a-z0-9_]*` per segment; the openapi pattern
# also allows "-", which 20 of the level-1 conformance cases use. We follow
# openapi (docs/explanation/decisions.md).
# Used with fullmatch(): a "$" would also accept a trailing newline.
TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_\-]*(\.[a-z][a-z0-9_\-]*)*")
# The type of the jobs Django's @task functions become when django-ojs is their backend
# (``django_ojs.tasks``, Django 6.0 and later), and of the handler that runs them; the task
# itself is named in the job's argument (``core/django_tasks.py``).
DJANGO_TASK_TYPE = "django.task"
QUEUE_PATTERN = re.compile(r"[a-z0-9][a-z0-9\-\.]*")
UUIDV7_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
MAX_TYPE_LENGTH = 255
MAX_QUEUE_LENGTH = 128
PRIORITY_RANGE = (-100, 100)
NAMED_PRIORITIES = {"high": 10, "normal": 0, "low": -10}  # ojs-core §5.2
MAX_JSON_DEPTH = 32  # ojs-json-format §13.5

# Attributes the server sets; a client's values are ignored (ojs-core §5.3).
SYSTEM_ATTRIBUTES = frozenset(
    {
        "state", "attempt", "max_attempts", "created_at", "enqueued_at", "started_at",
        "completed_at", "cancelled_at", "discarded_at", "finished_at", "error", "errors",
        "result", "worker_id", "retry_delay_ms", "next_attempt_at", "next_retry_at",
        "dead_letter", "kept_until", "lease_expires_at", "deadline_at", "releases", "run_at", "visibility_deadline",
        "attempts_charged", "snoozes", "signals", "waiting",
    }
)
# Top-level attributes this module reads; everything else is preserved as given.
KNOWN_ATTRIBUTES = frozenset(
    {
        "specversion", "id", "type", "queue", "args", "meta", "options", "priority",
        "timeout", "timeout_ms", "scheduled_at", "delay_until", "expires_at", "retry",
        "unique", "schema", "visibility_timeout", "visibility_timeout_ms", "tags", "pending",
        "rate_limit",
    }
)
KNOWN_OPTIONS = frozenset(
    {
        "queue", "priority", "timeout", "timeout_ms", "scheduled_at", "delay_until",
        "expires_at", "retry", "retry_policy", "unique", "tags", "visibility_timeout",
        "visibility_timeout_ms", "pending", "metadata", "meta", "rate_limit",
    }
)


@dataclass
class JobSpec:
    """A validated job as a client asked for it, before the store adds its attributes."""

    type: str
    args: list[Any]
    queue: str = "default"
    meta: dict[str, Any] = field(default_factory=dict)
    id: uuid.UUID | None = None
    # The id was made here (``enqueue``'s UUIDv7), not given by the caller: no other job can
    # have it, so a PUSH neither looks for it nor takes a savepoint in case it is taken.
    id_made_here: bool = False
    priority: int = 0
    retry: RetryPolicy = DEFAULT_POLICY
    timeout: dt.timedelta | None = None  # None: the configured default
    visibility_timeout: dt.timedelta | None = None  # None: the configured default
    scheduled_at: dt.datetime | RelativeTime | None = None
    expires_at: dt.datetime | RelativeTime | None = None
    pending: bool = False
    unique: UniquePolicy | None = None
    rate_limit: Limit | None = None
    tags: list[str] = field(default_factory=list)
    schema: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    given_times: dict[str, str] = field(default_factory=dict)
    cron_name: str | None = None


# -- parsing -------------------------------------------------------------------


def parse_job(
    body: object,
    *,
    default_queue: str = "default",
    default_retry: RetryPolicy = DEFAULT_POLICY,
    max_bytes: int | None = None,
    size: int | None = None,
    path: str = "",
) -> JobSpec:
    """Validate one PUSH body; raise InvalidRequest / PolicyInvalid naming the field.

    ``size`` is the body's encoded size when the caller knows it (the HTTP
    layer does); ``path`` prefixes field names, e.g. ``jobs[3].`` in a batch.
    """
    if not isinstance(body, Mapping):
        raise InvalidRequest(f"{path or 'request body'} must be a JSON object", field=path or None)
    if max_bytes is not None and size is not None and size > max_bytes:
        raise PayloadTooLarge(
            f"{path or 'the job'} is {size} bytes; the limit is {max_bytes} bytes",
            details={"size": size, "max_size": max_bytes},
        )
    options = body.get("options")
    if options is None:
        options = {}
    elif not isinstance(options, Mapping):
        raise InvalidRequest(f"{path}options must be an object", field=f"{path}options")

    def pick(*names: str) -> tuple[str, Any]:
        """The first option or top-level attribute present: options win (binding §9.1)."""
        for source, prefix in ((options, f"{path}options."), (body, path)):
            for name in names:
                if source.get(name) is not None:
                    return prefix + name, source[name]
        return "", None

    spec = JobSpec(
        type=_job_type(body.get("type"), f"{path}type"),
        args=_args(body.get("args", _MISSING), f"{path}args"),
        queue=_queue(*pick("queue"), default=default_queue),
    )
    _check_specversion(body.get("specversion"), f"{path}specversion")
    if body.get("id") is not None:
        spec.id = _job_id(body["id"], f"{path}id")
    spec.meta = _meta(body, options, path)
    spec.priority = _priority(*pick("priority"))
    where, policy = pick("retry", "retry_policy")
    spec.retry = parse_policy(policy, default_retry, field=where or f"{path}retry")
    spec.timeout = _timeout(options, body, path)
    spec.visibility_timeout = _visibility_timeout(options, body, path)
    for name, aliases in (("scheduled_at", ("scheduled_at", "delay_until")), ("expires_at", ("expires_at",))):
        where, value = pick(*aliases)
        if value is not None:
            parsed = _timestamp(value, where)
            setattr(spec, name, parsed)
            if not isinstance(parsed, RelativeTime):
                spec.given_times[name] = value
    spec.pending = _flag(*pick("pending"))
    where, unique = pick("unique")
    spec.unique = parse_unique(unique, where, args=spec.args, meta=spec.meta)
    where, rate_limit = pick("rate_limit")
    spec.rate_limit = parse_job_limit(rate_limit, where, queue=spec.queue)
    spec.tags = _tags(*pick("tags"))
    where, schema = pick("schema")
    if schema is not None:
        if not isinstance(schema, str) or len(schema) > 2048:
            raise InvalidRequest(f"{where} must be a URI string", field=where)
        spec.schema = schema
    spec.extra = {
        key: value
        for key, value in body.items()
        if key not in KNOWN_ATTRIBUTES and key not in SYSTEM_ATTRIBUTES
    }
    unknown_options = {k: v for k, v in options.items() if k not in KNOWN_OPTIONS}
    if unknown_options:
        spec.extra["options"] = unknown_options
    _check_json(spec.extra, f"{path}(extension attributes)")
    return spec


def with_args(spec: JobSpec, args: object) -> JobSpec:
    """A copy of ``spec`` (parsed by ``parse_job``) for other ``args``, validated as ``parse_job`` validates them.

    What ``parse_job`` decides does not depend on the args but for a unique
    policy's key (``spec.unique`` must be None). So the jobs of a batch that
    differ only in their args are parsed once. The copy has its own
    containers: a caller may change one job's meta or tags.
    """
    if spec.unique is not None:
        raise ValueError("a unique job's key depends on its args: parse it anew")
    copied = object.__new__(JobSpec)  # copy.copy's protocol costs more than the parse it saves
    copied.__dict__.update(spec.__dict__)
    copied.args = _args(args, "args")
    copied.meta, copied.tags = dict(spec.meta), list(spec.tags)
    copied.extra, copied.given_times = dict(spec.extra), dict(spec.given_times)
    return copied


def parse_batch(body: object, *, max_jobs: int, **kwargs: Any) -> list[JobSpec]:
    """Validate ``{"jobs": [...]}``: every job or none (ojs-http-binding §9.2)."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("request body must be a JSON object with a 'jobs' array")
    jobs = body.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise InvalidRequest("jobs must be a non-empty array of jobs", field="jobs")
    check_batch_size(jobs, max_jobs)
    specs = []
    for index, job in enumerate(jobs):
        try:
            specs.append(parse_job(job, path=f"jobs[{index}].", **kwargs))
        except InvalidRequest as exc:
            exc.details.setdefault("index", index)
            raise
    return specs


def check_batch_size(jobs: list[Any], max_jobs: int) -> None:
    if len(jobs) > max_jobs:
        raise InvalidRequest(
            f"a batch holds at most {max_jobs} jobs; this one has {len(jobs)}",
            field="jobs",
            details={"max_jobs": max_jobs, "count": len(jobs)},
        )


_MISSING = object()


def _job_type(value: Any, where: str) -> str:
    if value is None:
        raise InvalidRequest(f"{where} is required", field=where)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{where} must be a non-empty string", field=where)
    if len(value) > MAX_TYPE_LENGTH:
        raise InvalidRequest(f"{where} is longer than {MAX_TYPE_LENGTH} characters", field=where)
    if not TYPE_PATTERN.fullmatch(value):
        raise InvalidRequest(
            f"{where} {value!r} must be dot-separated lowercase segments like 'email.send' "
            "(each segment [a-z][a-z0-9_-]*)",
            field=where,
        )
    return value


def _args(value: Any, where: str) -> list[Any]:
    if value is _MISSING:
        raise InvalidRequest(f"{where} is required (a JSON array, possibly empty)", field=where)
    if not isinstance(value, list):
        raise InvalidRequest(
            f"{where} must be a JSON array, not {_json_type(value)}",
            field=where,
            details={"expected": "array", "received": _json_type(value)},
        )
    _check_json(value, where)
    return value


def _queue(where: str, value: Any, *, default: str) -> str:
    if value is None:
        return default
    return validate_queue_name(value, where or "queue")


def validate_queue_name(value: Any, where: str = "queue") -> str:
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{where} must be a non-empty string", field=where)
    if len(value) > MAX_QUEUE_LENGTH or not QUEUE_PATTERN.fullmatch(value):
        raise InvalidRequest(
            f"{where} {value!r} must be lowercase letters, digits, '-' and '.', "
            f"start with a letter or digit, and be at most {MAX_QUEUE_LENGTH} characters",
            field=where,
        )
    return value


def parse_job_ref(value: Any, where: str = "job_id") -> uuid.UUID:
    """A reference to an existing job: any UUID spelling is looked up (and may be 404)."""
    if isinstance(value, str) and len(value) <= 64:
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise InvalidRequest(f"{where} must be a job id (a UUID such as '019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f')", field=where)


def _job_id(value: Any, where: str) -> uuid.UUID:
    if not isinstance(value, str) or not UUIDV7_PATTERN.fullmatch(value):
        raise InvalidRequest(
            f"{where} must be a UUIDv7 in lowercase hyphenated form, "
            "e.g. '019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f'",
            field=where,
        )
    return uuid.UUID(value)


def _check_specversion(value: Any, where: str) -> None:
    if value is not None and value != SPEC_VERSION:
        raise InvalidRequest(f"{where} must be {SPEC_VERSION!r}", field=where)


def _meta(body: Mapping[str, Any], options: Mapping[str, Any], path: str) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    # openapi `options.metadata`: "merged into meta"; the envelope's own meta wins.
    for where, value in (
        (f"{path}options.metadata", options.get("metadata")),
        (f"{path}options.meta", options.get("meta")),
        (f"{path}meta", body.get("meta")),
    ):
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise InvalidRequest(f"{where} must be a JSON object", field=where)
        _check_json(value, where)
        meta.update(value)
    return meta


def _priority(where: str, value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str) and value.lower() in NAMED_PRIORITIES:
        return NAMED_PRIORITIES[value.lower()]
    low, high = PRIORITY_RANGE
    if not _is_int(value) or not low <= value <= high:
        raise InvalidRequest(
            f"{where} must be an integer from {low} to {high} (or 'high', 'normal', 'low')",
            field=where,
        )
    return value


def _timeout(options: Mapping[str, Any], body: Mapping[str, Any], path: str) -> dt.timedelta | None:
    # ojs-core §5.2 `timeout` is in seconds; the binding's `timeout_ms` in
    # milliseconds. 0 means "no explicit timeout": the default applies.
    for source, prefix in ((options, f"{path}options."), (body, path)):
        for name, unit_ms in (("timeout_ms", 1), ("timeout", 1000)):
            value = source.get(name)
            if value is None:
                continue
            where = prefix + name
            if not _is_number(value) or value < 0:
                raise InvalidRequest(f"{where} must be a non-negative number", field=where)
            millis = value * unit_ms
            if millis > 365 * 86400 * 1000:
                raise InvalidRequest(f"{where} is longer than a year", field=where)
            return dt.timedelta(milliseconds=millis) if millis else None
    return None


def _visibility_timeout(
    options: Mapping[str, Any], body: Mapping[str, Any], path: str
) -> dt.timedelta | None:
    for source, prefix in ((options, f"{path}options."), (body, path)):
        if source.get("visibility_timeout_ms") is not None:
            where = prefix + "visibility_timeout_ms"
            return _positive_duration_ms(source["visibility_timeout_ms"], where)
        value = source.get("visibility_timeout")
        if value is None:
            continue
        where = prefix + "visibility_timeout"
        # openapi: an ISO 8601 duration string; ojs-json-format: integer seconds.
        if isinstance(value, str):
            try:
                delta = parse_duration(value)
            except ValueError as exc:
                raise InvalidRequest(f"{where}: {exc}", field=where) from None
            return _positive_duration_ms(to_millis(delta), where)
        if _is_number(value):
            return _positive_duration_ms(value * 1000, where)
        raise InvalidRequest(f"{where} must be seconds or an ISO 8601 duration", field=where)
    return None


def _positive_duration_ms(value: Any, where: str) -> dt.timedelta:
    if not _is_number(value) or value <= 0 or value > 365 * 86400 * 1000:
        raise InvalidRequest(f"{where} must be a positive number of milliseconds up to a year", field=where)
    return dt.timedelta(milliseconds=value)


def _timestamp(value: Any, where: str) -> dt.datetime | RelativeTime:
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise InvalidRequest(f"{where}: {exc}", field=where) from None


def _flag(where: str, value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRequest(f"{where} must be true or false", field=where)
    return value


def _tags(where: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise InvalidRequest(f"{where} must be an array of strings", field=where)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value)
    )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _check_json(value: Any, where: str, depth: int = 0) -> None:
    """JSON-native values only (ojs-core §4 principle 4), nested at most 32 deep."""
    if depth > MAX_JSON_DEPTH:
        raise InvalidRequest(f"{where} is nested deeper than {MAX_JSON_DEPTH} levels", field=where)
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRequest(f"{where} holds {value}, which JSON cannot represent", field=where)
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidRequest(f"{where} has a non-string key {key!r}", field=where)
            _check_json(item, f"{where}.{key}", depth + 1)
        return
    raise InvalidRequest(
        f"{where} is a {type(value).__name__}, which is not a JSON-native type "
        "(use strings, numbers, booleans, null, arrays and objects)",
        field=where,
    )


# -- rendering -----------------------------------------------------------------


def render_job(job: Any, *, errors: Iterable[Any] | None = None, steps: Iterable[Any] | None = None) -> dict[str, Any]:
    """The wire envelope of a stored job; absent attributes are omitted (json-format §14.2).

    A job that checkpointed carries ``last_checkpoint`` (ojs-progress §6.4) with
    the attempt that sent it and when; ``steps``, its recorded durable steps,
    is rendered when given and not empty.

    Names from every document are emitted where they do not clash: the core's
    ``timeout`` (seconds) beside the binding's ``timeout_ms``, ``next_attempt_at``
    beside ``next_retry_at`` (docs/explanation/decisions.md, "Wire compatibility").
    """
    out: dict[str, Any] = dict(job.extra or {})
    state = job.state
    out.update(
        specversion=SPEC_VERSION,
        id=str(job.id),
        type=job.type,
        queue=job.queue,
        args=job.args,
        meta=job.meta,
        priority=job.priority,
        state=state,
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        retry=job.retry,
        visibility_timeout_ms=to_millis(job.visibility_timeout),
    )
    if job.timeout:
        millis = to_millis(job.timeout)
        out["timeout_ms"] = millis
        if millis % 1000 == 0:
            out["timeout"] = millis // 1000
    if job.unique:
        out["unique"] = job.unique
    if job.rate_limit:
        out["rate_limit"] = job.rate_limit
    if job.tags:
        out["tags"] = job.tags
    if job.schema:
        out["schema"] = job.schema
    given = job.given_times or {}
    times = {
        "created_at": job.created_at,
        "enqueued_at": job.enqueued_at,
        "scheduled_at": job.scheduled_at,
        "expires_at": job.expires_at,
        "started_at": job.started_at,
        "completed_at": job.completed_at,
    }
    if state == JobState.CANCELLED:
        times["cancelled_at"] = job.finished_at
    elif state == JobState.DISCARDED:
        times["discarded_at"] = job.finished_at
    elif state in (JobState.RETRYABLE, JobState.SCHEDULED):
        times["next_attempt_at" if state == JobState.RETRYABLE else "run_at"] = job.run_at
        if state == JobState.RETRYABLE:
            times["next_retry_at"] = job.run_at
    elif state == JobState.ACTIVE:
        times["visibility_deadline"] = job.lease_expires_at
        times["deadline_at"] = job.deadline_at
    for name, value in times.items():
        if value is not None:
            out[name] = given.get(name) or format_timestamp(value)
    if state == JobState.ACTIVE and job.worker_id:
        out["worker_id"] = job.worker_id
    if job.result is not None:
        out["result"] = job.result
    if job.error:
        out["error"] = job.error
    if job.retry_delay_ms is not None:
        out["retry_delay_ms"] = job.retry_delay_ms
    if getattr(job, "releases", 0):
        # Attempts given back uncharged (a shutdown, a NACK's requeue, a snooze) still count in
        # `attempt`: without this, attempt 2 of max_attempts 2 read as exhausted with one left.
        out["attempts_charged"] = job.attempt - job.releases
    if state == JobState.DISCARDED:
        out["dead_letter"] = job.dead_letter
        # When retention deletes it, which depends on what it is kept as (Job.kept_until).
        kept_until = getattr(job, "kept_until", None)
        if kept_until is not None:
            out["kept_until"] = format_timestamp(kept_until)
    out.update(render_waits(job))
    out.update(render_checkpoint(getattr(job, "checkpoint", None)))
    if steps:
        out["steps"] = [render_step(step) for step in steps]
    if errors is not None:
        out["errors"] = [render_error(entry) for entry in errors]
    return out


def render_waits(job: Any) -> dict[str, Any]:
    """This server's snooze and signals extension on a job: how often it snoozed, the signals
    delivered to it, and -- while it is parked on one -- what it waits for, since and until when."""
    out: dict[str, Any] = {}
    if getattr(job, "snoozes", 0):
        out["snoozes"] = job.snoozes
    if getattr(job, "signals", None):
        out["signals"] = job.signals
    name = getattr(job, "waiting_for", None)
    if name and job.state == JobState.SCHEDULED:
        record = (job.waits or {}).get(name) or {}
        out["waiting"] = {"signal": name, "since": record.get("since"), "until": record.get("until")}
    return out


def render_error(entry: Any) -> dict[str, Any]:
    """One entry of the error history (ojs-errors §6.2; ojs-retry §10.1 calls the time ``timestamp``)."""
    occurred = format_timestamp(entry.occurred_at)
    out: dict[str, Any] = {
        "attempt": entry.attempt,
        "type": entry.type,
        "code": entry.code or entry.type,
        "message": entry.message,
        "occurred_at": occurred,
        "timestamp": occurred,
    }
    if entry.backtrace:
        out["backtrace"] = entry.backtrace
    if entry.details:
        out["details"] = entry.details
    if entry.retryable is not None:
        out["retryable"] = entry.retryable
    return out
