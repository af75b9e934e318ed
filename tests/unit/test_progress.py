"""ojs-progress: parsing, clamping, monotonic merge, and what a read shows in each state."""

from __future__ import annotations

import pytest

from django_ojs.protocol.errors import InvalidRequest
from django_ojs.protocol.progress import Report, make, merge, parse, percent, view


@pytest.mark.parametrize(("given", "stored"), [(-0.5, 0.0), (1.3, 1.0), (0.47, 0.47), (1, 1.0)])
def test_numeric_progress_is_clamped_never_rejected(given, stored):
    assert make(given).progress == stored


@pytest.mark.parametrize("body", [
    {}, {"progress": "half"}, {"progress": True}, {"progress": float("nan")}, {"data": [1]},
    {"data": {"x": "y" * 5000}}, {"progress": 0.5, "colour": "red"}, [0.5], None,
])
def test_unusable_reports_are_invalid_requests(body):
    with pytest.raises(InvalidRequest):
        parse(body)


def test_numeric_progress_never_goes_back_within_an_attempt_but_data_moves_on():
    first = merge(None, 1, Report(0.6, {"phase": "a"}), "t1")
    second = merge(first, 1, Report(0.4, {"phase": "b"}), "t2")
    assert (second["progress"], second["data"], second["updated_at"]) == (0.6, {"phase": "b"}, "t2")
    assert merge(second, 1, Report(None, {"phase": "c"}), "t3")["progress"] == 0.6


def test_a_new_attempt_starts_from_nothing():
    old = merge(None, 1, Report(0.8, {"phase": "a"}), "t1")
    fresh = merge(old, 2, Report(0.1), "t2")
    assert (fresh["attempt"], fresh["progress"], fresh["data"]) == (2, 0.1, None)


def test_reads_follow_the_lifecycle():
    stored = merge(None, 2, Report(0.73, {"rows": 73}), "t")
    nothing = {"progress": None, "data": None, "updated_at": None}
    assert view("active", 2, stored)["progress"] == 0.73
    assert view("active", 3, stored) == nothing  # §5.3: the next attempt's progress starts empty
    assert view("completed", 2, stored)["progress"] == 1.0  # §8.1
    assert view("retryable", 2, stored)["progress"] == 0.73  # §8.2
    assert view("discarded", 2, stored)["data"] == {"rows": 73}
    assert view("completed", 1, None) == nothing  # no progress used: not invented


def test_percent():
    assert (percent(0.473), percent(1.0), percent(None)) == ("47%", "100%", "")
