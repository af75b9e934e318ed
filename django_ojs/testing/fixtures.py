"""pytest fixtures for ``django_ojs.testing`` (needs pytest-django).

In the project's top-level ``conftest.py``::

    pytest_plugins = ["django_ojs.testing.fixtures"]

then ask for ``ojs_jobs`` (manual mode) or ``ojs_inline`` (inline mode) in a
test. Both use pytest-django's ``db`` fixture, so each test starts with an
empty store and leaves nothing behind. ``ojs_jobs_transactional`` is the
same for tests that need ``transactional_db`` (e.g. code that enqueues
inside ``transaction.on_commit``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import JobsUnderTest, inline, manual


@pytest.fixture
def ojs_jobs(db) -> Iterator[JobsUnderTest]:
    """Manual mode: jobs wait; ``ojs_jobs.assert_enqueued(...)``, ``ojs_jobs.drain()``."""
    with manual() as jobs:
        yield jobs


@pytest.fixture
def ojs_inline(db) -> Iterator[JobsUnderTest]:
    """Inline mode: every enqueue runs its job at once in the test's thread."""
    with inline() as jobs:
        yield jobs


@pytest.fixture
def ojs_jobs_transactional(transactional_db) -> Iterator[JobsUnderTest]:
    with manual() as jobs:
        yield jobs
