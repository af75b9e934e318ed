"""The public OJS conformance suites, levels 0-4, against gunicorn + ojs_reaper.

Slow (the cron cases wait for real minute boundaries): marked
``conformance``, run by ``tox -e conformance``. Any failure outside
``expected-failures.txt``, or a listed case that passes, fails the test; so
do missing suites, unless ``OJS_SKIP_CONFORMANCE=1`` (harness.py).
"""

from __future__ import annotations

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


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_levels_0_to_4(database):
    runner_dir = conformance_dir()
    if runner_dir is None:
        if skip_missing_suites():
            pytest.skip(missing_suites_message())
        pytest.fail(missing_suites_message())
    artifacts = ROOT / "test-artifacts" / "conformance" / database
    with fresh_database(database) as database_url, running_stack(database_url, artifacts) as stack:
        result = run_suites(stack, runner_dir, LEVELS, artifacts / "report.json")
        extensions = run_extension_cases(stack, runner_dir, artifacts / "report-extensions.json")
    summary = (result.stdout + result.stderr).strip()
    print(summary)
    assert result.returncode == 0, summary
    # The project's own cases for its extensions' wire, run by the same runner on the same server.
    extension_summary = (extensions.stdout + extensions.stderr).strip()
    print(extension_summary)
    assert extensions.returncode == 0, extension_summary
