"""PUSH bodies in, envelopes out: django_ojs.protocol.envelope (pure, no database)."""

from __future__ import annotations

import datetime as dt
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from django_ojs.protocol.durations import RelativeTime
from django_ojs.protocol.envelope import parse_batch, parse_job, parse_job_ref, render_error, render_job
from django_ojs.protocol.errors import InvalidRequest, PayloadTooLarge, PolicyInvalid
from django_ojs.protocol.retry import DEFAULT_POLICY, RetryPolicy

UTC = dt.UTC
JOB_ID = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


def job(**body: Any):
    body.setdefault("type", "email.send")
    body.setdefault("args", [])
    return parse_job(body)


# --- the minimal job and defaults --------------------------------------------


def test_a_minimal_job_gets_the_documented_defaults():
    spec = parse_job({"type": "email.send", "args": ["a@example.com"]})
    assert (spec.type, spec.args, spec.queue, spec.meta, spec.priority) == (
        "email.send", ["a@example.com"], "default", {}, 0)
    assert spec.id is None
    assert spec.retry is DEFAULT_POLICY
    assert (spec.timeout, spec.visibility_timeout, spec.scheduled_at, spec.expires_at) == (None,) * 4
    assert spec.pending is False
    assert spec.extra == {}


def test_the_caller_supplies_the_default_queue_and_retry_policy():
    policy = RetryPolicy(max_attempts=9)
    spec = parse_job({"type": "a", "args": []}, default_queue="low", default_retry=policy)
    assert spec.queue == "low"
    assert spec.retry is policy
    assert parse_job({"type": "a", "args": [], "retry": {"jitter": False}}, default_retry=policy).retry == (
        RetryPolicy(max_attempts=9, jitter=False))


def test_a_client_chosen_uuidv7_is_kept():
    assert job(id=JOB_ID).id == uuid.UUID(JOB_ID)


# --- aliases: options vs top level, and the documents' different names --------


@pytest.mark.parametrize(
    ("body", "attribute", "expected"),
    [
        ({"queue": "top"}, "queue", "top"),
        ({"options": {"queue": "opt"}}, "queue", "opt"),
        ({"queue": "top", "options": {"queue": "opt"}}, "queue", "opt"),
        ({"priority": 5}, "priority", 5),
        ({"priority": 5, "options": {"priority": -5}}, "priority", -5),
        ({"tags": ["a"]}, "tags", ["a"]),
        ({"tags": ["a"], "options": {"tags": ["b"]}}, "tags", ["b"]),
        ({"pending": True}, "pending", True),
        ({"options": {"pending": True}}, "pending", True),
        ({"schema": "urn:ojs:schema:email.send:v1"}, "schema", "urn:ojs:schema:email.send:v1"),
    ],
    ids=lambda value: str(value) if not isinstance(value, dict) else None,
)
def test_options_win_over_top_level_attributes(body, attribute, expected):
    assert getattr(job(**body), attribute) == expected


@pytest.mark.parametrize("name", ["retry", "retry_policy"])
@pytest.mark.parametrize("place", ["top", "options"])
def test_the_retry_policy_is_read_from_either_place_and_either_name(name, place):
    policy = {"max_attempts": 7}
    body = {name: policy} if place == "top" else {"options": {name: policy}}
    assert job(**body).retry.max_attempts == 7


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"timeout": 30}, dt.timedelta(seconds=30)),
        ({"timeout_ms": 1500}, dt.timedelta(milliseconds=1500)),
        ({"options": {"timeout_ms": 2000}}, dt.timedelta(seconds=2)),
        ({"options": {"timeout": 2}}, dt.timedelta(seconds=2)),
        ({"timeout": 30, "options": {"timeout_ms": 2000}}, dt.timedelta(seconds=2)),
        ({"options": {"timeout": 9, "timeout_ms": 2000}}, dt.timedelta(seconds=2)),
        # ojs-core §5.2: 0 means "no explicit timeout", the default applies.
        ({"timeout": 0}, None),
    ],
)
def test_timeout_in_seconds_and_timeout_ms_in_milliseconds(body, expected):
    assert job(**body).timeout == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"visibility_timeout": 60}, dt.timedelta(seconds=60)),
        ({"visibility_timeout": "PT2M"}, dt.timedelta(minutes=2)),
        ({"visibility_timeout_ms": 2500}, dt.timedelta(milliseconds=2500)),
        ({"options": {"visibility_timeout_ms": 3000}}, dt.timedelta(seconds=3)),
        ({"options": {"visibility_timeout": "PT1S"}}, dt.timedelta(seconds=1)),
        ({"visibility_timeout_ms": 9000, "options": {"visibility_timeout_ms": 3000}}, dt.timedelta(seconds=3)),
    ],
)
def test_visibility_timeout_in_seconds_iso_or_milliseconds(body, expected):
    assert job(**body).visibility_timeout == expected


@pytest.mark.parametrize(
    "body",
    [
        {"scheduled_at": "2030-01-02T03:04:05Z"},
        {"delay_until": "2030-01-02T03:04:05Z"},
        {"options": {"scheduled_at": "2030-01-02T03:04:05Z"}},
        {"options": {"delay_until": "2030-01-02T03:04:05Z"}},
    ],
)
def test_delay_until_is_an_alias_of_scheduled_at(body):
    spec = job(**body)
    assert spec.scheduled_at == dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert spec.given_times == {"scheduled_at": "2030-01-02T03:04:05Z"}


def test_scheduled_at_wins_over_delay_until_in_the_same_place():
    spec = job(options={"delay_until": "2031-01-01T00:00:00Z", "scheduled_at": "2030-01-01T00:00:00Z"})
    assert spec.scheduled_at.year == 2030


def test_relative_timestamps_stay_relative_until_the_store_resolves_them():
    spec = job(options={"scheduled_at": "+PT5S", "expires_at": "+PT1M"})
    assert spec.scheduled_at == RelativeTime(dt.timedelta(seconds=5))
    assert spec.expires_at == RelativeTime(dt.timedelta(minutes=1))
    # Nothing to echo: the store renders the resolved instant.
    assert spec.given_times == {}


def test_timestamps_with_an_offset_are_normalised_to_utc_and_remembered_verbatim():
    spec = job(expires_at="2030-06-01T12:00:00.5+02:00")
    assert spec.expires_at == dt.datetime(2030, 6, 1, 10, 0, 0, 500000, tzinfo=UTC)
    assert spec.given_times == {"expires_at": "2030-06-01T12:00:00.5+02:00"}


def test_metadata_is_merged_into_meta_and_the_envelope_meta_wins():
    spec = job(
        meta={"trace_id": "envelope", "a": 1},
        options={"metadata": {"trace_id": "metadata", "b": 2}, "meta": {"c": 3, "b": "meta"}},
    )
    assert spec.meta == {"trace_id": "envelope", "a": 1, "b": "meta", "c": 3}


@pytest.mark.parametrize(
    ("unique", "args", "keys", "args_keys"),
    [
        # ojs-json-format §3.5: `key` lists fields of args.
        ({"key": ["to"], "period": "PT1H"}, [{"to": "a@example.com"}], ["type", "args"], ["to"]),
        # Dimension names under `key` are read as `keys` (the conformance AUDIT).
        ({"key": ["type", "queue"]}, [], ["type", "queue"], None),
        ({"keys": ["args"]}, [1], ["args"], None),
        # Both given: `keys` is the unique-jobs spelling and wins.
        ({"keys": ["queue"], "key": ["b"]}, [], ["queue"], None),
    ],
)
def test_unique_key_is_read_as_keys(unique, args, keys, args_keys):
    policy = job(args=args, options={"unique": unique}).unique
    assert list(policy.keys) == keys
    assert policy.args_keys == (tuple(args_keys) if args_keys else None)


@pytest.mark.parametrize(("name", "value"), [("high", 10), ("normal", 0), ("low", -10), ("HIGH", 10)])
def test_named_priorities_have_the_core_values(name, value):
    assert job(options={"priority": name}).priority == value


@pytest.mark.parametrize("priority", [-100, 100, 0])
def test_priorities_at_the_edges_of_the_range_are_accepted(priority):
    assert job(priority=priority).priority == priority


def test_pending_defaults_to_false_and_accepts_a_boolean():
    assert job().pending is False
    assert job(options={"pending": False}).pending is False
    assert job(options={"pending": True}).pending is True


# --- extension attributes -------------------------------------------------------


def test_unknown_attributes_are_preserved_in_extra():
    spec = job(x_custom_field="v", x_numeric_extension=42, x_future_spec_attribute={"nested": [1, None]})
    assert spec.extra == {
        "x_custom_field": "v",
        "x_numeric_extension": 42,
        "x_future_spec_attribute": {"nested": [1, None]},
    }


def test_unknown_options_are_preserved_under_options():
    assert job(options={"queue": "q", "x_vendor_flag": True}).extra == {"options": {"x_vendor_flag": True}}


def test_system_attributes_sent_by_a_client_are_ignored():
    spec = job(
        state="completed", attempt=7, max_attempts=99, created_at="2020-01-01T00:00:00Z",
        started_at="2020-01-01T00:00:00Z", error={"type": "x"}, result=1, worker_id="forged",
        dead_letter=True, errors=[],
    )
    assert spec.extra == {}
    assert spec.retry is DEFAULT_POLICY


def test_extension_attributes_must_be_json_native_and_shallow():
    with pytest.raises(InvalidRequest) as raised:
        job(x_deep=_nested(40))
    assert raised.value.field.startswith("(extension attributes).x_deep[0]")


# --- validation: every error names its field ------------------------------------


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"args": []}, "type"),
        ({"type": None, "args": []}, "type"),
        ({"type": "", "args": []}, "type"),
        ({"type": 5, "args": []}, "type"),
        ({"type": "Email.Send", "args": []}, "type"),
        ({"type": "email..send", "args": []}, "type"),
        ({"type": "email.send.", "args": []}, "type"),
        ({"type": "1email", "args": []}, "type"),
        ({"type": "a" * 256, "args": []}, "type"),
        ({"type": "email.send"}, "args"),
        ({"type": "email.send", "args": None}, "args"),
        ({"type": "email.send", "args": {"to": "x"}}, "args"),
        ({"type": "email.send", "args": "x"}, "args"),
        ({"type": "email.send", "args": [float("nan")]}, "args[0]"),
        ({"type": "email.send", "args": [{"k": float("inf")}]}, "args[0].k"),
        ({"type": "email.send", "args": [object()]}, "args[0]"),
        ({"type": "email.send", "args": [{1: "int key"}]}, "args[0]"),
        ({"type": "email.send", "args": _nested(40)}, None),
        ({"type": "a", "args": [], "id": "not-a-uuid"}, "id"),
        ({"type": "a", "args": [], "id": JOB_ID.upper()}, "id"),
        ({"type": "a", "args": [], "id": "019461a8-1a2b-4c3d-8e4f-5a6b7c8d9e0f"}, "id"),
        ({"type": "a", "args": [], "id": 7}, "id"),
        ({"type": "a", "args": [], "specversion": "2.0"}, "specversion"),
        ({"type": "a", "args": [], "queue": "Upper"}, "queue"),
        ({"type": "a", "args": [], "queue": "-starts-with-dash"}, "queue"),
        ({"type": "a", "args": [], "queue": ""}, "queue"),
        ({"type": "a", "args": [], "queue": "q" * 129}, "queue"),
        ({"type": "a", "args": [], "options": {"queue": "has space"}}, "options.queue"),
        ({"type": "a", "args": [], "options": []}, "options"),
        ({"type": "a", "args": [], "options": "fast"}, "options"),
        ({"type": "a", "args": [], "meta": []}, "meta"),
        ({"type": "a", "args": [], "meta": {"k": float("nan")}}, "meta.k"),
        ({"type": "a", "args": [], "options": {"metadata": "x"}}, "options.metadata"),
        ({"type": "a", "args": [], "priority": 101}, "priority"),
        ({"type": "a", "args": [], "priority": -101}, "priority"),
        ({"type": "a", "args": [], "options": {"priority": 999999}}, "options.priority"),
        ({"type": "a", "args": [], "priority": 1.5}, "priority"),
        ({"type": "a", "args": [], "priority": True}, "priority"),
        ({"type": "a", "args": [], "priority": "urgent"}, "priority"),
        ({"type": "a", "args": [], "timeout": -1}, "timeout"),
        ({"type": "a", "args": [], "timeout": "30s"}, "timeout"),
        ({"type": "a", "args": [], "options": {"timeout_ms": True}}, "options.timeout_ms"),
        ({"type": "a", "args": [], "options": {"timeout_ms": 10**15}}, "options.timeout_ms"),
        ({"type": "a", "args": [], "visibility_timeout_ms": 0}, "visibility_timeout_ms"),
        ({"type": "a", "args": [], "options": {"visibility_timeout_ms": -5}}, "options.visibility_timeout_ms"),
        ({"type": "a", "args": [], "visibility_timeout": "soon"}, "visibility_timeout"),
        ({"type": "a", "args": [], "visibility_timeout": [1]}, "visibility_timeout"),
        ({"type": "a", "args": [], "scheduled_at": "2030-01-01T00:00:00"}, "scheduled_at"),
        ({"type": "a", "args": [], "options": {"delay_until": "2030-01-01"}}, "options.delay_until"),
        ({"type": "a", "args": [], "options": {"delay_until": 1767225600}}, "options.delay_until"),
        ({"type": "a", "args": [], "expires_at": "tomorrow"}, "expires_at"),
        ({"type": "a", "args": [], "expires_at": "2030-02-30T00:00:00Z"}, "expires_at"),
        ({"type": "a", "args": [], "expires_at": "+soon"}, "expires_at"),
        ({"type": "a", "args": [], "options": {"pending": "yes"}}, "options.pending"),
        ({"type": "a", "args": [], "options": {"unique": ["to"]}}, "options.unique"),
        ({"type": "a", "args": [], "options": {"tags": "one"}}, "options.tags"),
        ({"type": "a", "args": [], "options": {"tags": [1]}}, "options.tags"),
        ({"type": "a", "args": [], "schema": 12}, "schema"),
    ],
)
def test_every_invalid_attribute_is_refused_naming_its_field(body, field):
    with pytest.raises(InvalidRequest) as raised:
        parse_job(body)
    if field is not None:
        assert raised.value.field == field
        assert raised.value.details["field"] == field
        assert field in raised.value.message
    assert raised.value.code == "invalid_request"


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        ({"max_attempts": -1}, "options.retry.max_attempts"),
        ({"backoff_coefficient": 0.5}, "options.retry.backoff_coefficient"),
        ({"initial_interval": "fast"}, "options.retry.initial_interval"),
        ({"on_exhaustion": "explode"}, "options.retry.on_exhaustion"),
        ("three times", "options.retry"),
    ],
)
def test_retry_policy_errors_are_semantic_validation_errors_naming_the_path_sent(retry, field):
    # 422 validation_error, not 400 (AUDIT §2.3), naming where the client put the policy.
    with pytest.raises(PolicyInvalid) as raised:
        parse_job({"type": "a", "args": [], "options": {"retry": retry}})
    assert raised.value.code == "validation_error"
    assert raised.value.field == field
    assert raised.value.message.startswith(field)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"retry": {"max_attempts": -1}}, "retry.max_attempts"),
        ({"retry_policy": {"max_attempts": -1}}, "retry_policy.max_attempts"),
        ({"options": {"retry_policy": {"max_attempts": -1}}}, "options.retry_policy.max_attempts"),
    ],
)
def test_retry_policy_errors_name_the_spelling_sent(body, field):
    with pytest.raises(PolicyInvalid) as raised:
        job(**body)
    assert raised.value.field == field


def test_a_body_that_is_not_an_object_is_refused():
    for body in ([], "job", 3, None):
        with pytest.raises(InvalidRequest):
            parse_job(body)


def test_an_oversized_envelope_is_too_large_not_invalid():
    with pytest.raises(PayloadTooLarge) as raised:
        parse_job({"type": "a", "args": []}, max_bytes=100, size=101)
    assert raised.value.details == {"size": 101, "max_size": 100}
    assert parse_job({"type": "a", "args": []}, max_bytes=100, size=100).type == "a"


# --- batches ------------------------------------------------------------------------


def test_a_batch_parses_every_job_in_order():
    specs = parse_batch({"jobs": [{"type": "a", "args": [1]}, {"type": "b", "args": [2]}]}, max_jobs=10)
    assert [(s.type, s.args) for s in specs] == [("a", [1]), ("b", [2])]


@pytest.mark.parametrize("body", [{"jobs": []}, {"jobs": {"type": "a"}}, {}, []])
def test_a_batch_needs_a_non_empty_jobs_array(body):
    with pytest.raises(InvalidRequest):
        parse_batch(body, max_jobs=10)


def test_a_batch_over_the_maximum_size_is_refused():
    with pytest.raises(InvalidRequest) as raised:
        parse_batch({"jobs": [{"type": "a", "args": []}] * 3}, max_jobs=2)
    assert raised.value.details["max_jobs"] == 2


def test_a_batch_error_names_the_job_and_its_field():
    with pytest.raises(InvalidRequest) as raised:
        parse_batch({"jobs": [{"type": "a", "args": []}, {"type": "b", "args": {}}]}, max_jobs=10)
    assert raised.value.field == "jobs[1].args"
    assert raised.value.details["index"] == 1


# --- references to existing jobs ------------------------------------------------


def test_a_job_reference_accepts_any_uuid_spelling():
    assert parse_job_ref(JOB_ID.upper()) == uuid.UUID(JOB_ID)
    assert parse_job_ref("0d0b3cd5-1b5c-4d3f-9a8b-7c6d5e4f3a2b").version == 4


@pytest.mark.parametrize("value", ["", "nope", None, 42, ["x"], "x" * 100])
def test_a_malformed_job_reference_names_its_field(value):
    with pytest.raises(InvalidRequest) as raised:
        parse_job_ref(value, "job_id")
    assert raised.value.field == "job_id"


# --- rendering --------------------------------------------------------------------


def stored(**overrides: Any) -> SimpleNamespace:
    """An object with the attributes of a stored Job."""
    at = dt.datetime(2026, 2, 12, 10, 30, tzinfo=UTC)
    values = dict(
        id=uuid.UUID(JOB_ID), type="email.send", queue="default", args=["a"], meta={"k": "v"}, priority=0,
        state="available", attempt=0, max_attempts=3, retry=DEFAULT_POLICY.to_dict(),
        visibility_timeout=dt.timedelta(seconds=1800), timeout=None, unique=None, rate_limit=None, tags=[], schema="",
        extra={}, given_times={}, created_at=at, enqueued_at=at, scheduled_at=None, expires_at=None,
        started_at=None, completed_at=None, finished_at=None, run_at=None, lease_expires_at=None,
        deadline_at=None, worker_id=None, result=None, error=None, retry_delay_ms=None, dead_letter=False,
    )
    values.update(overrides)
    return SimpleNamespace(**values)


def test_render_emits_the_core_envelope_and_omits_absent_attributes():
    out = render_job(stored())
    assert out == {
        "specversion": "1.0",
        "id": JOB_ID,
        "type": "email.send",
        "queue": "default",
        "args": ["a"],
        "meta": {"k": "v"},
        "priority": 0,
        "state": "available",
        "attempt": 0,
        "max_attempts": 3,
        "retry": DEFAULT_POLICY.to_dict(),
        "visibility_timeout_ms": 1800000,
        "created_at": "2026-02-12T10:30:00.000Z",
        "enqueued_at": "2026-02-12T10:30:00.000Z",
    }


def test_render_emits_timeout_in_both_spellings():
    assert {k: v for k, v in render_job(stored(timeout=dt.timedelta(seconds=30))).items() if "timeout" in k} == {
        "timeout": 30, "timeout_ms": 30000, "visibility_timeout_ms": 1800000}
    # A timeout that is not whole seconds has no `timeout` (an integer of seconds).
    out = render_job(stored(timeout=dt.timedelta(milliseconds=1500)))
    assert out["timeout_ms"] == 1500 and "timeout" not in out


def test_render_echoes_client_timestamps_verbatim():
    scheduled = dt.datetime(2099, 12, 31, 21, 59, 59, tzinfo=UTC)
    out = render_job(stored(
        state="scheduled", scheduled_at=scheduled, run_at=scheduled, expires_at=scheduled,
        given_times={"scheduled_at": "2099-12-31T23:59:59+02:00"},
    ))
    assert out["scheduled_at"] == "2099-12-31T23:59:59+02:00"
    assert out["expires_at"] == "2099-12-31T21:59:59.000Z"
    assert out["run_at"] == "2099-12-31T21:59:59.000Z"


def test_render_a_retryable_job_names_its_next_attempt_both_ways():
    at = dt.datetime(2026, 2, 12, 10, 30, 6, 789000, tzinfo=UTC)
    out = render_job(stored(state="retryable", run_at=at, retry_delay_ms=4000, error={"type": "x"}))
    assert out["next_attempt_at"] == out["next_retry_at"] == "2026-02-12T10:30:06.789Z"
    assert (out["retry_delay_ms"], out["error"]) == (4000, {"type": "x"})
    assert "dead_letter" not in out


def test_render_an_active_job_shows_its_reservation():
    at = dt.datetime(2026, 2, 12, 11, 0, tzinfo=UTC)
    out = render_job(stored(state="active", attempt=1, worker_id="w1", started_at=at, lease_expires_at=at,
                            deadline_at=at))
    assert (out["worker_id"], out["visibility_deadline"], out["deadline_at"], out["started_at"]) == (
        "w1", "2026-02-12T11:00:00.000Z", "2026-02-12T11:00:00.000Z", "2026-02-12T11:00:00.000Z")


@pytest.mark.parametrize(("state", "name"), [("cancelled", "cancelled_at"), ("discarded", "discarded_at")])
def test_render_a_finished_job_names_when_it_finished(state, name):
    at = dt.datetime(2026, 2, 12, 11, 0, tzinfo=UTC)
    out = render_job(stored(state=state, finished_at=at, worker_id="w1"))
    assert out[name] == "2026-02-12T11:00:00.000Z"
    assert "worker_id" not in out
    assert ("dead_letter" in out) is (state == "discarded")


def test_render_keeps_extension_attributes_at_the_top_level_and_core_attributes_win():
    out = render_job(stored(extra={"x_custom_field": "v", "type": "forged"}))
    assert out["x_custom_field"] == "v"
    assert out["type"] == "email.send"


def test_render_keeps_a_falsy_result():
    assert render_job(stored(state="completed", result=0))["result"] == 0
    assert "result" not in render_job(stored(state="completed", result=None))


def test_render_includes_the_error_history_only_when_given():
    entry = SimpleNamespace(attempt=1, type="SmtpError", code="", message="refused", backtrace=["at x"],
                            details=None, retryable=True,
                            occurred_at=dt.datetime(2026, 2, 12, 10, 30, 0, 123000, tzinfo=UTC))
    assert "errors" not in render_job(stored())
    assert render_job(stored(), errors=[entry])["errors"] == [render_error(entry)]
    assert render_error(entry) == {
        "attempt": 1, "type": "SmtpError", "code": "SmtpError", "message": "refused",
        "occurred_at": "2026-02-12T10:30:00.123Z", "timestamp": "2026-02-12T10:30:00.123Z",
        "backtrace": ["at x"], "retryable": True,
    }
