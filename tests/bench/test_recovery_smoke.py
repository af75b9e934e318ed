"""``python -m tests.bench.recovery`` requeues each size and reports it, on a database it drops."""

from __future__ import annotations

import re

import pytest

from .smoke import run_bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_small_run_reports_each_size():
    output = run_bench("recovery", "--sizes", "5,20", "--rounds", "1")
    for size in (5, 20):
        line = re.search(rf"recover +{size} jobs: median +([\d.]+) ms", output)
        assert line is not None and float(line[1]) > 0, output
