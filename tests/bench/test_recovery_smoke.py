"""``python -m tests.bench.recovery`` requeues each size and reports it, on a database it drops."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import database_url

from .stage import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_small_run_reports_each_size():
    result = subprocess.run(
        [sys.executable, "-m", "tests.bench.recovery", "--sizes", "5,20", "--rounds", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "DATABASE_URL": database_url()},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for size in (5, 20):
        line = re.search(rf"recover +{size} jobs: median +([\d.]+) ms", result.stdout)
        assert line is not None and float(line[1]) > 0, result.stdout
