"""``python -m tests.bench.event_rows`` reports both layouts' cost, on a database it drops."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import database_url

from .stage import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_small_run_reports_both_layouts_and_their_ratio():
    result = subprocess.run(
        [sys.executable, "-m", "tests.bench.event_rows", "--rounds", "2", "--statements", "5"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "DATABASE_URL": database_url()},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"before 0033 -?\d+ µs, now -?\d+ µs, now/before -?[\d.]+", result.stdout), result.stdout
