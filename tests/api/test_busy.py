"""SQLite held by another writer past the busy timeout: a clear 503 to retry, never a 500, nothing written.

With ``transaction_mode: IMMEDIATE`` (manage.py check's W008) a writer waits for
the lock at BEGIN; a writer that holds it longer than the timeout is contention,
not a fault: the request is refused whole, with ``Retry-After``.
"""

from __future__ import annotations

import sqlite3

import pytest
from django.db import connection

from django_ojs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_push_that_finds_sqlite_locked_by_another_writer_is_503_and_writes_nothing(api):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's file lock")
    connection.ensure_connection()
    connection.connection.execute("PRAGMA busy_timeout = 200")  # not the settings' 30 s
    other = sqlite3.connect(connection.settings_dict["NAME"])
    other.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock
    try:
        response = api.post("/ojs/v1/jobs", {"type": "busy.job", "args": []})
        batch = api.post("/ojs/v1/jobs/batch", {"jobs": [{"type": "busy.job", "args": []}]})
    finally:
        other.rollback()
        other.close()
    for answer in (response, batch):
        error = answer.json()["error"]
        assert (answer.status_code, error["code"], error["retryable"]) == (503, "backend_unavailable", True), error
        assert answer["Retry-After"] == "1"
        # The settings have transaction_mode IMMEDIATE: the hint does not ask for it.
        assert "transaction_mode" not in error["hint"] and "busy timeout" in error["hint"], error["hint"]
    assert not Job.objects.exists()
    assert api.post("/ojs/v1/jobs", {"type": "busy.job", "args": []}).status_code == 201  # the lock gone, it passes
