"""The demo (manage.py ojs_demo) runs server, reaper and worker on SQLite and jobs flow."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from .conftest import ROOT
from .test_control import free_port

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stop", ["duration", "ctrl-c"])
def test_the_demo_runs_jobs_and_stops_cleanly(tmp_path, stop):
    database = tmp_path / "demo.sqlite3"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "example_project.settings",
           "DATABASE_URL": f"sqlite:///{database}", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "manage.py", "ojs_demo", "--port", str(free_port()), "--every", "0.5"]
    if stop == "duration":
        command += ["--duration", "6"]
    demo = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if stop == "ctrl-c":
        time.sleep(6)
        demo.send_signal(signal.SIGINT)  # what Ctrl+C in the terminal sends the demo
    output, _ = demo.communicate(timeout=90)
    assert demo.returncode == 0, output
    assert "API key (scope admin" in output and "password" in output
    assert "demo stopped." in output
    with sqlite3.connect(database) as db:
        states = dict(db.execute("SELECT state, COUNT(*) FROM django_ojs_job GROUP BY state").fetchall())
        errors = {row[0] for row in db.execute("SELECT type FROM django_ojs_joberror")}
        workers = db.execute("SELECT COUNT(*) FROM django_ojs_worker").fetchone()[0]
    assert states.get("completed", 0) >= 5, states
    assert "FlakyServiceError" in errors
    assert workers == 0  # the worker deregistered on its way out
