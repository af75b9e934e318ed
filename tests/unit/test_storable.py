"""What the HTTP door and the job search refuse to store: django_ojs.protocol.storable.check_storable (pure, property-tested)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_ojs.protocol.errors import InvalidPayload, InvalidRequest, PayloadTooLarge
from django_ojs.protocol.storable import MAX_BODY_DEPTH, check_storable

STORABLE_TEXT = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | STORABLE_TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(STORABLE_TEXT, inner, max_size=5),
    max_leaves=40,
)


def compact_size(value: Any) -> int:
    """What the limit measures: the value as a client sends it, compact and in UTF-8."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


@given(JSON, st.integers(min_value=0, max_value=400))
def test_the_size_limit_is_the_compact_utf8_encoding_exactly(value, limit):
    size = compact_size(value)
    if size > limit:
        with pytest.raises(PayloadTooLarge) as refused:
            check_storable(value, max_bytes=limit)
        assert refused.value.details["max_size"] == limit
    else:
        check_storable(value, max_bytes=limit)
    check_storable(value, max_bytes=size)


@given(JSON, st.sampled_from(["\x00", "\ud800", "\udfff"]), st.data())
def test_an_unstorable_character_anywhere_is_refused_naming_where(value, bad, data):
    """Put the bad character in one string (or key) somewhere inside; the error names that place."""
    spoiled, path = data.draw(_spoil(value, bad))
    with pytest.raises(InvalidRequest) as refused:
        check_storable(spoiled, where="body")
    assert refused.value.field == path.encode("unicode_escape").decode("ascii")  # printable


def _spoil(value: Any, bad: str, path: str = "body") -> st.SearchStrategy[tuple[Any, str]]:
    """A copy of ``value`` with ``bad`` in one place, and that place's path."""
    choices = [st.just(({"x" + bad: value}, f"{path}.x{bad}"))]
    if isinstance(value, str):
        choices.append(st.just((value + bad, path)))
    if isinstance(value, list) and value:
        choices.append(st.integers(0, len(value) - 1).flatmap(
            lambda i: _spoil(value[i], bad, f"{path}[{i}]").map(
                lambda inner: ([*value[:i], inner[0], *value[i + 1:]], inner[1]))))
    if isinstance(value, dict) and value:
        keys = sorted(value)
        choices.append(st.sampled_from(keys).flatmap(
            lambda k: _spoil(value[k], bad, f"{path}.{k}").map(lambda inner: ({**value, k: inner[0]}, inner[1]))))
    return st.one_of(choices)


def test_nesting_is_refused_past_the_limit_at_any_length():
    check_storable(_nested(MAX_BODY_DEPTH))
    with pytest.raises(InvalidPayload):
        check_storable(_nested(MAX_BODY_DEPTH + 1))


def test_infinite_numbers_are_refused_where_they_are():
    with pytest.raises(InvalidRequest) as refused:
        check_storable({"jobs": [{"args": [1, float("inf")]}]})
    assert refused.value.field == "jobs[0].args[1]"


def _nested(levels: int) -> Any:
    value: Any = 1
    for level in range(levels):
        value = [value] if level % 2 else {"k": value}
    return value
