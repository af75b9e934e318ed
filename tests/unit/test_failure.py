"""The error a worker reports on FAIL: django_ojs.protocol.failure (pure)."""

from __future__ import annotations

import pytest

from django_ojs.protocol.errors import InvalidRequest
from django_ojs.protocol.failure import (
    MAX_BACKTRACE_CHARS,
    MAX_BACKTRACE_FRAMES,
    MAX_MESSAGE_CHARS,
    Failure,
    cap_backtrace,
    parse_failure,
)


def test_the_core_error_object_is_read_as_sent():
    failure = parse_failure({"type": "SmtpConnectionError", "message": "refused", "backtrace": ["a", "b"]})
    assert failure == Failure(type="SmtpConnectionError", message="refused", backtrace=["a", "b"])


def test_the_binding_nack_error_keeps_its_code_and_uses_it_as_the_type():
    failure = parse_failure({"code": "handler_error", "message": "boom", "retryable": True,
                             "details": {"error_class": "SMTPError"}})
    assert (failure.type, failure.code, failure.retryable, failure.details) == (
        "handler_error", "handler_error", True, {"error_class": "SMTPError"})


def test_type_and_code_may_both_be_given():
    failure = parse_failure({"type": "TimeoutError", "code": "handler_error", "message": ""})
    assert (failure.type, failure.code) == ("TimeoutError", "handler_error")


@pytest.mark.parametrize(("value", "frames"), [
    ({"stack": ["f1", "f2"]}, ["f1", "f2"]),
    ({"backtrace": "f1\nf2\n"}, ["f1", "f2"]),
    ({"stack": "only\nlines"}, ["only", "lines"]),
    ({"backtrace": ["kept"], "stack": ["ignored"]}, ["kept"]),
])
def test_stack_and_multiline_strings_are_accepted_as_backtraces(value, frames):
    assert parse_failure({"type": "E", **value}).backtrace == frames


def test_a_missing_error_is_a_generic_failure():
    failure = parse_failure(None)
    assert failure.type == "error" and failure.message and failure.retryable is None


def test_an_empty_error_object_has_type_error():
    assert parse_failure({}) == Failure(type="error", message="")


@pytest.mark.parametrize(("value", "field"), [
    ("boom", "error"),
    (["boom"], "error"),
    ({"type": 5}, "error.type"),
    ({"type": "x" * 256}, "error.type"),
    ({"code": ["handler_error"]}, "error.code"),
    ({"message": 5}, "error.message"),
    ({"retryable": "yes"}, "error.retryable"),
    ({"details": ["x"]}, "error.details"),
    ({"backtrace": [1, 2]}, "error.backtrace"),
    ({"backtrace": {"frame": 1}}, "error.backtrace"),
])
def test_malformed_errors_name_their_field(value, field):
    with pytest.raises(InvalidRequest) as raised:
        parse_failure(value)
    assert raised.value.field == field


def test_the_backtrace_keeps_at_most_50_frames():
    frames = [f"frame {i}" for i in range(80)]
    assert parse_failure({"backtrace": frames}).backtrace == frames[:MAX_BACKTRACE_FRAMES] == frames[:50]


def test_the_backtrace_keeps_at_most_10000_characters_of_whole_frames():
    frames = ["x" * 3000] * 4
    kept = cap_backtrace(frames)
    assert kept == frames[:3]
    assert sum(map(len, kept)) <= MAX_BACKTRACE_CHARS == 10_000
    assert cap_backtrace(["y" * 10_001, "short"]) == []
    assert cap_backtrace(["y" * 10_000]) == ["y" * 10_000]


def test_the_message_is_capped():
    assert len(parse_failure({"message": "m" * 20_000}).message) == MAX_MESSAGE_CHARS


@pytest.mark.parametrize(("code", "handler_code"), [
    ("DISCARD", "DISCARD"), ("DEAD_LETTER", "DEAD_LETTER"), ("RETRY", "RETRY"), ("FAIL", "FAIL"),
    ("discard", None), ("handler_error", None), ("", None),
])
def test_only_the_uppercase_retry_codes_override_the_policy(code, handler_code):
    assert Failure(type="E", message="", code=code).handler_code == handler_code


def test_non_retryable_matching_sees_the_type_the_code_and_the_error_class():
    failure = parse_failure({"type": "T", "code": "C", "details": {"error_class": "K"}})
    assert failure.match_candidates == ("T", "C", "K")
    assert parse_failure({"type": "T", "details": {"error_class": 3}}).match_candidates == ("T", None, None)


def test_the_stored_error_carries_both_names_the_attempt_and_the_time():
    failure = parse_failure({"code": "handler_error", "message": "m", "retryable": False, "backtrace": ["f"],
                             "details": {"k": 1}})
    assert failure.as_dict(2, "2026-01-01T00:00:00Z") == {
        "type": "handler_error", "code": "handler_error", "message": "m", "retryable": False,
        "backtrace": ["f"], "details": {"k": 1}, "attempt": 2, "occurred_at": "2026-01-01T00:00:00Z",
    }
    assert Failure(type="T", message="m").as_dict(1, "t") == {
        "type": "T", "code": "T", "message": "m", "attempt": 1, "occurred_at": "t"}
