"""protocol/fairness.py: a job's value of a fairness key, the paths accepted, the shares of a claim."""

from __future__ import annotations

import pytest

from django_ojs.protocol import fairness
from django_ojs.protocol.errors import InvalidRequest


@pytest.mark.parametrize(
    ("path", "args", "meta", "value"),
    [
        ("meta.tenant", [], {"tenant": "acme"}, "acme"),
        ("meta.tenant", [], {}, ""),
        ("meta.tenant", [], {"tenant": None}, ""),
        ("meta.tenant", [], {"tenant": 42}, "42"),
        ("meta.tenant", [], {"tenant": {"id": 1}}, ""),
        ("args.0", ["acme", 1], {}, "acme"),
        ("args.1.customer", ["x", {"customer": "c-7"}], {}, "c-7"),
        ("args.3.customer", ["x"], {}, ""),
        ("args.0.customer", ["not an object"], {}, ""),
        ("meta.tenant", [], {"tenant": "x" * 300}, "x" * 255),
    ],
)
def test_a_jobs_value(path, args, meta, value):
    assert fairness.key_of(path, args, meta) == value


@pytest.mark.parametrize("path", ["meta.tenant", "args.0", "args.12.customer_id", "meta.org-id"])
def test_paths_accepted(path):
    assert fairness.parse_path(path) == path


@pytest.mark.parametrize("path", ["tenant", "meta", "meta.", "meta.a.b", "args.01", "args.x", "args.0.a.b", 3, "",
                                  "meta.tenant\n", "args.0\n", " meta.tenant"])
def test_paths_refused_with_the_field(path):
    with pytest.raises(InvalidRequest) as refused:
        fairness.parse_path(path)
    assert "fairness_key" in refused.value.message


def test_null_turns_fairness_off():
    assert fairness.parse_path(None) is None


def turns(*specs: tuple[str, int, int]) -> list[fairness.Turn]:
    return [fairness.Turn(key, weight, used) for key, weight, used in specs]


@pytest.mark.parametrize(
    ("waiting", "count", "slots"),
    [
        (turns(("a", 1, 0), ("b", 1, 0)), 1, ["a"]),
        (turns(("a", 1, 0), ("b", 1, 0)), 5, ["a", "b", "a", "b", "a"]),
        (turns(("a", 1, 0), ("b", 1, 0), ("c", 1, 0)), 3, ["a", "b", "c"]),
        (turns(("acme", 3, 0), ("small", 1, 0)), 9, ["acme"] * 3 + ["small"] + ["acme"] * 3 + ["small", "acme"]),
        # Two of acme's three used: one left in its round, then small's, then acme's next round.
        (turns(("acme", 3, 2), ("small", 1, 0)), 4, ["acme", "small", "acme", "acme"]),
        # A weight lowered below what the round used: one more claim, then the round ends.
        (turns(("a", 2, 5), ("b", 1, 0)), 3, ["a", "b", "a"]),
        (turns(), 3, []),
        (turns(("a", 1, 0)), 0, []),
    ],
)
def test_weighted_round_robin_slots(waiting, count, slots):
    assert fairness.schedule(waiting, count) == slots


def test_slots_go_on_from_what_the_claim_took():
    assert fairness.schedule(turns(("a", 2, 0), ("b", 1, 0)), 3, {"a": 2, "b": 1}) == ["a", "a", "b"]
    assert fairness.schedule(turns(("a", 2, 0), ("b", 1, 0)), 2, {"a": 1}) == ["a", "b"]


@pytest.mark.parametrize(
    ("waiting", "got", "used", "ended"),
    [
        (turns(("a", 1, 0), ("b", 1, 0)), {"a": 2, "b": 1}, {"a": 0, "b": 0}, ["b", "a"]),
        (turns(("acme", 3, 0), ("small", 1, 0)), {"acme": 1}, {"acme": 1}, []),
        (turns(("acme", 3, 2), ("small", 1, 0)), {"acme": 1, "small": 1}, {"acme": 0, "small": 0}, ["acme", "small"]),
        (turns(("acme", 3, 0), ("small", 1, 0)), {"acme": 5, "small": 2}, {"acme": 2, "small": 0}, ["acme", "small"]),
        (turns(("acme", 3, 0), ("small", 1, 0)), {"acme": 6, "small": 1}, {"acme": 0, "small": 0}, ["small", "acme"]),
    ],
)
def test_what_a_claim_leaves_for_the_next(waiting, got, used, ended):
    assert fairness.advance(waiting, got) == (used, ended)


@pytest.mark.parametrize("weights", [
    [], "acme=3", {"acme": 0}, {"acme": -1}, {"acme": 1.5}, {"acme": "3"}, {"acme": True},
    {"acme": fairness.MAX_WEIGHT + 1}, {"x" * 256: 1}, {f"t{i}": 1 for i in range(fairness.MAX_WEIGHTED_VALUES + 1)},
    {"\x00": 2}, {"a\x00b": 2}, {"\ud800": 2},  # no job's value can hold them; PostgreSQL cannot store them
])
def test_bad_weights_are_refused_with_the_field(weights):
    with pytest.raises(InvalidRequest) as refused:
        fairness.parse_weights(weights)
    assert refused.value.details["field"].startswith("fairness_weights")


def test_weights_accepted():
    assert fairness.parse_weights({"small": 1, "acme": 3}) == {"acme": 3, "small": 1}
    assert fairness.parse_weights(None) == {}
    assert fairness.parse_default_weight(None) == 1
    assert fairness.parse_default_weight(2) == 2
    for bad in (0, "2", 2.0, False):
        with pytest.raises(InvalidRequest):
            fairness.parse_default_weight(bad)
