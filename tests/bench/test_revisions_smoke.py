"""``python -m tests.bench.revisions`` runs two sides in turn and reports each against the first."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import database_url

from .stage import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.mark.parametrize("step", ["push", "enqueue", "bulk"])
def test_a_small_run_reports_each_side_against_the_first(step):
    count = "1" if step == "bulk" else "5"
    result = subprocess.run(
        [sys.executable, "-m", "tests.bench.revisions", step, ".", ".", "--count", count, "--rounds", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "DATABASE_URL": database_url()},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    sides = re.findall(r"  \.: CPU (\d+) µs \(([\d.]+)x\), wall (\d+) µs \(([\d.]+)x\) each", result.stdout)
    assert len(sides) == 2 and sides[0][1] == sides[0][3] == "1.000", result.stdout
