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


@pytest.mark.parametrize("path", ["tenant", "meta", "meta.", "meta.a.b", "args.01", "args.x", "args.0.a.b", 3, ""])
def test_paths_refused_with_the_field(path):
    with pytest.raises(InvalidRequest) as refused:
        fairness.parse_path(path)
    assert "fairness_key" in refused.value.message


def test_null_turns_fairness_off():
    assert fairness.parse_path(None) is None


@pytest.mark.parametrize(
    ("keys", "count", "shares"),
    [
        (["a", "b"], 1, [("a", 1)]),
        (["a", "b"], 5, [("a", 3), ("b", 2)]),
        (["a", "b", "c"], 3, [("a", 1), ("b", 1), ("c", 1)]),
        ([], 3, []),
        (["a"], 0, []),
    ],
)
def test_round_robin_shares(keys, count, shares):
    assert fairness.round_robin(keys, count) == shares
