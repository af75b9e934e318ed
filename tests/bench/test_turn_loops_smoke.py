"""``python -m tests.bench.turn_loops`` runs and reports each shape, on a database it drops."""

from __future__ import annotations

import re

import pytest

from .smoke import run_bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_small_run_reports_each_shape_with_its_wait_profile():
    output = run_bench("turn_loops", "--processes", "1,2", "--jobs", "400", "--rounds", "1")
    for shape in (1, 2):
        line = re.search(rf"{shape} × turn loop: ([\d,]+) jobs/s; backend CPU ([\d.]+) ms/turn; .*backends: (.+)",
                         output)
        assert line is not None, output
        assert int(line[1].replace(",", "")) > 0 and float(line[2]) > 0, line[0]
