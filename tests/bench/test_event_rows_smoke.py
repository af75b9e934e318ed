"""``python -m tests.bench.event_rows`` reports both layouts' cost, on a database it drops."""

from __future__ import annotations

import re

import pytest

from .smoke import run_bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_small_run_reports_both_layouts_and_their_ratio():
    output = run_bench("event_rows", "--rounds", "2", "--statements", "5")
    assert re.search(r"before 0033 -?\d+ µs, now -?\d+ µs, now/before -?[\d.]+", output), output
