"""``python -m tests.bench.turn_loops`` runs and reports each shape, on a database it drops."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import database_url

from .stage import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_small_run_reports_each_shape_with_its_wait_profile():
    result = subprocess.run(
        [sys.executable, "-m", "tests.bench.turn_loops", "--processes", "1,2", "--jobs", "400", "--rounds", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "DATABASE_URL": database_url()},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for shape in (1, 2):
        line = re.search(rf"{shape} × turn loop: ([\d,]+) jobs/s; backend CPU ([\d.]+) ms/turn; .*backends: (.+)",
                         result.stdout)
        assert line is not None, result.stdout
        assert int(line[1].replace(",", "")) > 0 and float(line[2]) > 0, line[0]
