"""The demo (manage.py ojs_demo) runs server, reaper and worker on SQLite and jobs flow."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from .conftest import ROOT
from .test_control import free_port

pytestmark = pytest.mark.slow


def test_the_demo_runs_jobs_and_stops_cleanly(tmp_path):
    database = tmp_path / "demo.sqlite3"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "example_project.settings",
           "DATABASE_URL": f"sqlite:///{database}", "PYTHONUNBUFFERED": "1"}
    finished = subprocess.run(
        [sys.executable, "manage.py", "ojs_demo", "--port", str(free_port()), "--every", "0.5", "--duration", "6"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90,
    )
    output = finished.stdout + finished.stderr
    assert finished.returncode == 0, output
    assert "API key (scope admin" in output and "password" in output
    assert "demo stopped." in output
    with sqlite3.connect(database) as db:
        states = dict(db.execute("SELECT state, COUNT(*) FROM django_ojs_job GROUP BY state").fetchall())
        errors = {row[0] for row in db.execute("SELECT type FROM django_ojs_joberror")}
        workers = db.execute("SELECT COUNT(*) FROM django_ojs_worker").fetchone()[0]
    assert states.get("completed", 0) >= 5, states
    assert "FlakyServiceError" in errors
    assert workers == 0  # the worker deregistered on its way out
