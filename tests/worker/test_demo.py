"""The demo (manage.py ojs_demo) runs server, reaper and worker on SQLite and jobs flow."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import urllib.request

import pytest

from .conftest import ROOT, wait_until
from .test_control import free_port

pytestmark = pytest.mark.slow


def demo_progress(database) -> tuple[dict[str, int], set[str]]:
    """Job counts per state and the error types recorded so far; empty until the demo has migrated."""
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5) as db:
            states = dict(db.execute("SELECT state, COUNT(*) FROM django_ojs_job GROUP BY state").fetchall())
            errors = {row[0] for row in db.execute("SELECT type FROM django_ojs_joberror")}
    except sqlite3.OperationalError:  # no database or no tables yet
        return {}, set()
    return states, errors


def jobs_flowed(database) -> bool:
    """Sample jobs succeeded, and a flaky one failed once (then retried)."""
    states, errors = demo_progress(database)
    return states.get("completed", 0) >= 5 and "FlakyServiceError" in errors


def serves(port: int) -> dict[str, tuple[int, str]]:
    """What the demo's web server answers for the API's health and an admin stylesheet: status and Server header."""
    answers = {}
    for path in ("/ojs/v1/health", "/static/django_ojs/admin/ojs.css"):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
            answers[path] = (response.status, response.headers["Server"])
    return answers


@pytest.mark.parametrize("stop", ["duration", "ctrl-c"])
def test_the_demo_runs_jobs_and_stops_cleanly(tmp_path, stop):
    database = tmp_path / "demo.sqlite3"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "example_project.settings",
           "DATABASE_URL": f"sqlite:///{database}", "PYTHONUNBUFFERED": "1"}
    port = free_port()
    command = [sys.executable, "manage.py", "ojs_demo", "--port", str(port), "--every", "0.5"]
    if stop == "duration":
        command += ["--duration", "6"]
    # A file, not a pipe: nobody reads a pipe while the test waits, and the
    # demo's children write their logs to it too.
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        demo = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            if stop == "ctrl-c":
                # Ctrl+C once jobs have flowed, however long a busy machine takes to start the demo.
                wait_until(lambda: jobs_flowed(database) or demo.poll() is not None, 300, "jobs to flow in the demo")
                served = serves(port)
                demo.send_signal(signal.SIGINT)  # what Ctrl+C in the terminal sends the demo
            # The stop waits for the worker's running jobs (sleeps of up to 4 s).
            demo.wait(timeout=300)
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait(10)
    output = log.read_text(errors="replace")
    assert demo.returncode == 0, output
    assert "API key (scope admin" in output and "password" in output
    assert "demo stopped." in output
    states, _ = demo_progress(database)
    assert sum(states.values()) > 0, output  # sample jobs were enqueued
    if stop == "ctrl-c":
        assert jobs_flowed(database)
        # gunicorn with the production configuration, the admin's styles included.
        assert served == {"/ojs/v1/health": (200, "gunicorn"), "/static/django_ojs/admin/ojs.css": (200, "gunicorn")}
    with sqlite3.connect(database) as db:
        workers = db.execute("SELECT COUNT(*) FROM django_ojs_worker").fetchone()[0]
    assert workers == 0  # the worker deregistered on its way out (or never got to register)
