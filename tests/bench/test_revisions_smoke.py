"""``python -m tests.bench.revisions`` runs two sides in turn and reports each against the first."""

from __future__ import annotations

import re

import pytest

from .smoke import run_bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.mark.parametrize("step", ["push", "enqueue", "bulk"])
def test_a_small_run_reports_each_side_against_the_first(step):
    count = "1" if step == "bulk" else "5"
    output = run_bench("revisions", step, ".", ".", "--count", count, "--rounds", "2")
    sides = re.findall(r"  \.: CPU (\d+) µs \(([\d.]+)x\), wall (\d+) µs \(([\d.]+)x\) each", output)
    assert len(sides) == 2 and sides[0][1] == sides[0][3] == "1.000", output
