"""``tox -e conformance`` without its suites fails, saying where to get them; it skips only when told to.

Runs the conformance env's own command (read from tox.ini) in a subprocess,
with ``OJS_CONFORMANCE_DIR`` naming an empty directory: the run must end in
failure before it touches a database, not pass by skipping.
"""

from __future__ import annotations

import configparser
import os
import shlex
import subprocess
import sys

from .harness import ROOT, SKIP_VARIABLE


def conformance_command() -> list[str]:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    lines = [line for line in tox["testenv:conformance"]["commands"].splitlines() if line.strip()]
    assert len(lines) == 1, f"tox.ini's conformance env has one command: {lines}"
    words = shlex.split(lines[0].replace("{posargs}", ""))
    assert words[0] == "pytest", words
    return [sys.executable, "-m", "pytest", *words[1:], "-p", "no:cacheprovider", "tests/conformance"]


def run(tmp_path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    # As tox's conformance env runs it: on its own settings, not the SQLite env's test database
    # (under which the PostgreSQL run would skip for want of PostgreSQL instead of failing).
    env = {key: value for key, value in os.environ.items() if key not in (SKIP_VARIABLE, "OJS_TEST_DATABASE_URL", "DATABASE_URL")}
    env.update(OJS_CONFORMANCE_DIR=str(tmp_path), **extra_env)
    return subprocess.run(conformance_command(), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_missing_suites_fail_the_run_and_say_where_to_get_them(tmp_path):
    done = run(tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "2 failed" in output, output
    assert f"the OJS conformance suites are not at {tmp_path}" in output
    assert "../shared/conformance" in output and "OJS_CONFORMANCE_DIR" in output and SKIP_VARIABLE in output


def test_missing_suites_are_skipped_only_when_asked(tmp_path):
    done = run(tmp_path, **{SKIP_VARIABLE: "1"})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "2 skipped" in output and "failed" not in output, output
