"""Envelopes in and out, property-tested (Hypothesis).

- A generated valid PUSH body parses; the job stored from it renders back to
  an envelope that parses to the same job (the store changes nothing a client
  said, and a rendered job is itself a valid PUSH body).
- A valid body with one field spoilt, or any JSON object at all, is either a
  job or refused with the envelope's own error (an ``OJSError``): never
  another exception.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from django_ojs.conf import ojs_settings
from django_ojs.models import Job
from django_ojs.protocol.durations import format_duration
from django_ojs.protocol.envelope import (
    KNOWN_ATTRIBUTES,
    MAX_QUEUE_LENGTH,
    MAX_TYPE_LENGTH,
    QUEUE_PATTERN,
    SYSTEM_ATTRIBUTES,
    TYPE_PATTERN,
    JobSpec,
    parse_job,
    render_job,
)
from django_ojs.protocol.errors import OJSError

TEXT = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=15,
)
TYPES = st.from_regex(TYPE_PATTERN, fullmatch=True).filter(lambda name: len(name) <= MAX_TYPE_LENGTH)
QUEUES = st.from_regex(QUEUE_PATTERN, fullmatch=True).filter(lambda name: len(name) <= MAX_QUEUE_LENGTH)
TIMESTAMPS = st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1)).map(
    lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{moment.microsecond // 1000:03d}Z"
                                                           if moment.microsecond >= 1000 else "Z")
)
INTERVALS = st.integers(1, 3600).map(lambda seconds: format_duration(dt.timedelta(seconds=seconds)))
RETRY = st.fixed_dictionaries({}, optional={
    "max_attempts": st.integers(0, 50),
    "initial_interval": INTERVALS,
    "backoff_coefficient": st.floats(1, 10),
    "jitter": st.booleans(),
    "non_retryable_errors": st.lists(st.from_regex(r"[A-Za-z][A-Za-z0-9_.]{0,20}", fullmatch=True), max_size=3),
    "on_exhaustion": st.sampled_from(["discard", "dead_letter"]),
    "backoff_strategy": st.sampled_from(["exponential", "linear", "polynomial", "constant"]),
})
# Attribute names OJS does not define: stored and returned unchanged.
EXTENSION_NAMES = st.from_regex(r"x_[a-z]{1,8}", fullmatch=True)
OPTIONS = st.fixed_dictionaries({}, optional={
    "queue": QUEUES,
    "priority": st.integers(-100, 100) | st.sampled_from(["high", "normal", "low"]),
    "timeout": st.integers(1, 86400),
    "visibility_timeout_ms": st.integers(1, 10**9),
    "retry": RETRY,
    "tags": st.lists(TEXT, max_size=3),
    "expires_at": TIMESTAMPS,
    "metadata": st.dictionaries(TEXT, JSON, max_size=3),
})
BODIES = st.fixed_dictionaries(
    {"type": TYPES, "args": st.lists(JSON, max_size=4)},
    optional={
        "meta": st.dictionaries(TEXT, JSON, max_size=3),
        "options": OPTIONS,
        "specversion": st.just("1.0"),
        "schema": st.just("https://example.com/schemas/job.json"),
    },
).flatmap(lambda body: st.dictionaries(EXTENSION_NAMES, JSON, max_size=2).map(lambda extra: {**extra, **body}))


def as_json(value: Any) -> Any:
    """JSON numbers compared as the decimals they spell: PostgreSQL's jsonb keeps
    6.965486824098109e+16 as 69654868240981090, the same JSON number."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return Decimal(repr(value))
    if isinstance(value, list):
        return [as_json(item) for item in value]
    return {key: as_json(item) for key, item in value.items()}


def same_job(first: JobSpec, second: JobSpec) -> None:
    """What a client said is what it gets back: every attribute but the defaults the store filled in."""
    default_visibility = dt.timedelta(seconds=ojs_settings.DEFAULT_VISIBILITY_TIMEOUT)
    default_timeout = dt.timedelta(seconds=ojs_settings.DEFAULT_TIMEOUT) if ojs_settings.DEFAULT_TIMEOUT else None
    for name in ("type", "queue", "priority", "retry", "tags", "schema", "unique", "scheduled_at", "expires_at",
                 "given_times"):
        assert getattr(first, name) == getattr(second, name), name
    for name in ("args", "meta", "extra"):
        assert as_json(getattr(first, name)) == as_json(getattr(second, name)), name
    assert (first.visibility_timeout or default_visibility) == second.visibility_timeout
    assert (first.timeout or default_timeout) == second.timeout


@given(BODIES)
def test_a_valid_envelope_is_stored_and_rendered_back_unchanged(db, body):
    spec = parse_job(json.loads(json.dumps(body)))
    job = Job.objects.push(spec)
    rendered = render_job(Job.objects.get(pk=job.pk))
    assert (rendered["state"], rendered["attempt"]) == ("available", 0)
    again = parse_job(json.loads(json.dumps(rendered)))
    same_job(spec, again)
    assert str(again.id) == rendered["id"] == str(job.id)
    # Held by a worker, it renders more server attributes: still none a PUSH would keep.
    held = Job.objects.get(pk=job.pk)
    held.state, held.attempt, held.worker_id = "active", 1, "w1"
    held.started_at = held.lease_expires_at = held.deadline_at = held.created_at
    same_job(spec, parse_job(json.loads(json.dumps(render_job(held)))))


# --- refusals ------------------------------------------------------------------------------------

# Per field: values it never accepts (wrong type, out of range, malformed, near misses).
SPOILERS: dict[str, list[Any]] = {
    "type": [None, "", "Email.Send", "a..b", "a b", "a\n", "1a", "a" * 256, 5, [], {}],
    "args": ["x", {}, 5, True, [json.loads("[" * 40 + "]" * 40)], [float("inf")]],
    "meta": ["x", [], 5],
    "id": ["not-a-uuid", "6f1f6b2e-7b1c-4d2e-9f3a-1b2c3d4e5f60", "019461A8-1A2B-7C3D-8E4F-5A6B7C8D9E0F",
           "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f\n", 5],
    "specversion": ["2.0", 1, ""],
    "options": ["x", [], 5],
    "options.queue": ["", "Q", "a b", "q\n", "x" * 129, 5, [], "-q"],
    "options.priority": [101, -101, 1.5, "urgent", True, []],
    "options.timeout": [-1, "x", True, 10**20, []],
    "options.visibility_timeout_ms": [0, -5, "x", True, 10**20],
    "options.scheduled_at": ["2026-01-01T00:00:00", "x", 5, "2026-02-30T00:00:00Z", "2026-01-01T00:00:00Z\n",
                             "+P99999999D"],
    "options.expires_at": ["yesterday", 0, "2026-13-01T00:00:00Z"],
    "options.retry": ["x", 5, {"max_attempts": -1}, {"backoff_coefficient": 0.5}, {"initial_interval": "soon"},
                      {"initial_interval": "PT10S", "max_interval": "PT1S"}, {"on_exhaustion": "explode"},
                      {"backoff_strategy": "random"}, {"max_attempts": "3"}],
    "options.tags": ["x", [1], [None]],
    "options.pending": ["yes", 1],
    "options.unique": ["x", 5],
    "options.metadata": ["x", [1]],
    "schema": [5, "x" * 2049],
}


def spoil(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    spoiled = json.loads(json.dumps(body))
    if "." in path:
        parent, name = path.split(".")
        if not isinstance(spoiled.get(parent), dict):
            spoiled[parent] = {}
        spoiled[parent][name] = value
    else:
        spoiled[path] = value
    return spoiled


@given(BODIES, st.sampled_from([(path, value) for path, values in SPOILERS.items() for value in values]))
def test_a_spoilt_field_is_refused_with_the_envelopes_own_error(body, spoiler):
    path, value = spoiler
    if path == "options" or path.startswith("options."):
        # Where the option is also given at the top level, options win: drop the other spelling.
        body = {key: item for key, item in body.items() if key != path.split(".")[-1]}
    spoiled = spoil(body, path, value)
    with pytest.raises(OJSError) as refused:
        parse_job(spoiled)
    assert refused.value.code in ("invalid_request", "validation_error")
    assert refused.value.details.get("field", "").startswith(path.split(".")[0]), refused.value.details


@given(st.dictionaries(st.sampled_from(sorted(KNOWN_ATTRIBUTES | SYSTEM_ATTRIBUTES)) | TEXT, JSON, max_size=8))
def test_any_json_object_is_a_job_or_an_envelope_error(body):
    try:
        spec = parse_job(body)
    except OJSError:
        return
    assume(spec is not None)
    assert TYPE_PATTERN.fullmatch(spec.type) and isinstance(spec.args, list)
