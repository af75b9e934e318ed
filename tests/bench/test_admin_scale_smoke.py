"""The dashboards-at-scale benchmark still runs: a small fill, every path answered, its database dropped.

No speed is asserted (the 10-million-job figures are in docs/explanation/performance.md,
"Dashboards at scale"); this keeps ``python -m tests.bench.admin_scale`` from rotting while
the pages and statements it measures change.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import psycopg
import pytest

from tests.helpers import database_url

from .admin_scale import NAME_WIDTH, admin_pages, api_paths
from .stage import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _server(url: str) -> str:
    """The server part of a database URL: the bench makes its own database there."""
    return url.rsplit("/", 1)[0]


def test_a_small_run_answers_every_path_and_drops_its_database():
    server = _server(database_url())
    name = f"ojs_scale_smoke_{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "-m", "tests.bench.admin_scale", "--finished", "20000", "--waiting", "2000",
               "--rounds", "1", "--server", server, "--database", name, "--port", "8239"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]

    table = result.stdout.split("slowest statement", 1)[1]
    rows = {line[:NAME_WIDTH].strip(): line[NAME_WIDTH:].split() for line in table.splitlines()[2:] if line.strip()}
    ids = {"some_id": "x", "dead_seq": "1", "big_seq": "1", "dead_id": "x", "middle_seq": "1", "key": ""}
    expected = [name for name, _ in admin_pages(ids)] + [name for name, _ in api_paths(ids)]
    assert len(set(expected)) == len(expected)
    for name in expected:
        median, p95, status = rows[name][:3]
        assert status == "200", (name, rows[name])  # every path answered, none refused or failed
        assert median.endswith("ms") and p95.endswith("ms")
    with psycopg.connect(f"{server}/postgres") as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None
