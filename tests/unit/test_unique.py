"""Unique policies, fingerprints and holding sets (pure: no database)."""

from __future__ import annotations

import datetime as dt

import pytest

from django_ojs.protocol.errors import InvalidRequest
from django_ojs.protocol.states import JobState as S
from django_ojs.protocol.unique import LIVE, canonical_json, decode_states, encode_states, parse_unique


def policy(value, args=(), meta=None):
    return parse_unique(value, "unique", args=list(args), meta=meta or {})


def test_defaults_follow_the_spec():
    p = policy({})
    assert p.keys == ("type",) and p.on_conflict == "reject" and p.period is None
    assert p.states == LIVE


def test_the_fingerprint_ignores_key_order_and_unicode_form_and_integral_floats():
    p = policy({"keys": ["args"]})
    a = p.fingerprint("t", "q", [{"a": 1, "b": "e\u0301"}], {})
    b = p.fingerprint("t", "q", [{"b": "\u00e9", "a": 1.0}], {})
    assert a == b and len(a) == 64 and a == a.lower()


def test_type_is_always_in_the_fingerprint_and_queue_only_when_asked():
    by_type = policy({"keys": ["args"]})
    assert by_type.fingerprint("a", "q", [1], {}) != by_type.fingerprint("b", "q", [1], {})
    assert by_type.fingerprint("a", "q1", [1], {}) == by_type.fingerprint("a", "q2", [1], {})
    by_queue = policy({"keys": ["queue"]})
    assert by_queue.fingerprint("a", "q1", [1], {}) != by_queue.fingerprint("a", "q2", [1], {})


def test_args_keys_select_fields_of_the_args_object():
    p = policy({"keys": ["args"], "args_keys": ["user_id"]}, args=[{"user_id": 42, "locale": "en"}])
    assert p.fingerprint("t", "q", [{"user_id": 42, "locale": "en"}], {}) == p.fingerprint(
        "t", "q", [{"user_id": 42, "locale": "fr"}], {}
    )
    assert p.fingerprint("t", "q", [{"user_id": 42}], {}) != p.fingerprint("t", "q", [{"user_id": 43}], {})


def test_meta_keys_select_meta_fields():
    p = policy({"keys": ["meta"], "meta_keys": ["tenant"]})
    assert p.fingerprint("t", "q", [], {"tenant": "a", "trace": 1}) == p.fingerprint("t", "q", [], {"tenant": "a"})
    assert p.fingerprint("t", "q", [], {"tenant": "a"}) != p.fingerprint("t", "q", [], {"tenant": "b"})


def test_canonical_json_is_compact_and_sorted():
    assert canonical_json({"b": [1.0, {"d": 1, "c": 2}], "a": "x"}) == '{"a":"x","b":[1,{"c":2,"d":1}]}'


@pytest.mark.parametrize(
    "value",
    [
        {"keys": ["argz"]},
        {"keys": ["meta"]},  # meta without meta_keys
        {"keys": ["args"], "args_keys": ["missing"]},
        {"states": ["finished"]},
        {"states": []},
        {"on_conflict": "overwrite"},
        {"period": "one hour"},
        {"period": "PT0S"},
        {"unknown": 1},
        {"keys": ["args"], "args_keys": ["a\x00"]},
        "reject",
    ],
)
def test_invalid_policies_are_refused(value):
    with pytest.raises(InvalidRequest):
        policy(value, args=[{"a": 1}])


def test_use_existing_is_ignore_and_periods_are_iso_8601():
    p = policy({"on_conflict": "use_existing", "period": "PT1H"})
    assert p.on_conflict == "ignore" and p.period == dt.timedelta(hours=1)
    assert p.to_dict()["period"] == "PT1H"


@pytest.mark.parametrize(
    ("states", "holding"),
    [
        (["scheduled"], {S.SCHEDULED}),
        (["scheduled", "pending"], {S.SCHEDULED, S.PENDING}),
        (["available"], set(LIVE)),
        (["available", "active"], set(LIVE)),
        (["completed"], set(LIVE) | {S.COMPLETED}),
    ],
)
def test_the_holding_set_is_widened_so_a_job_never_returns_to_it(states, holding):
    assert policy({"states": states}).holding_states == holding


def test_states_encode_for_the_index_predicate():
    encoded = encode_states({S.ACTIVE, S.AVAILABLE})
    assert encoded == ",active,available,"
    assert decode_states(encoded) == {S.ACTIVE, S.AVAILABLE} and decode_states(None) == frozenset()
