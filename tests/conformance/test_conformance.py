"""The public OJS conformance suites, levels 0-4, against gunicorn + ojs_reaper.

Slow (the cron cases wait for real minute boundaries): marked
``conformance``, run by ``tox -e conformance``. Any failure outside
``expected-failures.txt``, or a listed case that passes, fails the test; so
do missing suites, unless ``OJS_SKIP_CONFORMANCE=1`` (harness.py).

The PostgreSQL and SQLite runs share nothing (a database, a server and a
reaper each) and spend most of their time waiting on the runner's sleeps, so
they run at the same time, each in a thread of its own: the two take the
time of the longer, where one after the other they took the sum.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from .harness import (
    ROOT,
    conformance_dir,
    fresh_database,
    missing_suites_message,
    run_extension_cases,
    run_suites,
    running_stack,
    skip_missing_suites,
)

pytestmark = pytest.mark.conformance

LEVELS = "0-4"
DATABASES = ("postgres", "sqlite")


def run_on(database: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The suites, then the project's extension cases, on a fresh stack over ``database``."""
    runner_dir = conformance_dir()
    assert runner_dir is not None
    artifacts = ROOT / "test-artifacts" / "conformance" / database
    with fresh_database(database) as database_url, running_stack(database_url, artifacts) as stack:
        result = run_suites(stack, runner_dir, LEVELS, artifacts / "report.json")
        extensions = run_extension_cases(stack, runner_dir, artifacts / "report-extensions.json")
    return result, extensions


@pytest.fixture(scope="module")
def conformance_runs(request) -> Iterator[dict[str, Future] | None]:
    """Every selected database's run, started at once; each test waits for its own.
    None without the suites: each test then fails (or skips, when told to) itself."""
    if conformance_dir() is None:
        yield None
        return
    selected = [
        item.callspec.params["database"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_levels_0_to_4"
    ]
    with ThreadPoolExecutor(max_workers=len(DATABASES)) as pool:
        yield {database: pool.submit(run_on, database) for database in dict.fromkeys(selected)}


@pytest.mark.parametrize("database", DATABASES)
def test_levels_0_to_4(database, conformance_runs):
    if conformance_runs is None:
        if skip_missing_suites():
            pytest.skip(missing_suites_message())
        pytest.fail(missing_suites_message())
    result, extensions = conformance_runs[database].result()
    summary = (result.stdout + result.stderr).strip()
    print(f"\n== {database}\n{summary}")
    assert result.returncode == 0, summary
    # The project's own cases for its extensions' wire, run by the same runner on the same server.
    extension_summary = (extensions.stdout + extensions.stderr).strip()
    print(extension_summary)
    assert extensions.returncode == 0, extension_summary
