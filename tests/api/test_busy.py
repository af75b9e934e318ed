"""SQLite held by another writer past the busy timeout: a clear 503 to retry, never a 500, nothing written.

With ``transaction_mode: IMMEDIATE`` (manage.py check's W008) a writer waits for
the lock at BEGIN; a writer that holds it longer than the timeout is contention,
not a fault: the request is refused whole, with ``Retry-After``, and logged once, as a
warning that says what it is -- not also by Django's request logger as an ERROR
("Service Unavailable"), which is what mails ``ADMINS`` and pages whoever watches errors.
"""

from __future__ import annotations

import logging
import sqlite3

import pytest
from django.db import connection

from django_ojs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_push_that_finds_sqlite_locked_by_another_writer_is_503_and_writes_nothing(api, caplog):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's file lock")
    connection.ensure_connection()
    connection.connection.execute("PRAGMA busy_timeout = 200")  # not the settings' 30 s
    other = sqlite3.connect(connection.settings_dict["NAME"])
    other.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock
    caplog.set_level(logging.INFO)
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
    said = [(record.name, record.levelname, record.getMessage()) for record in caplog.records]
    assert [line[:2] for line in said] == [("django_ojs.api", "WARNING")] * 2, said
    for (_, _, message), (path, answer) in zip(said, [("/ojs/v1/jobs", response), ("/ojs/v1/jobs/batch", batch)]):
        assert message == (
            f"POST {path}: 503, to be retried (request {answer.json()['error']['request_id']}): "
            "SQLite stayed locked by other writers past the busy timeout (database is locked)"
        )
    assert api.post("/ojs/v1/jobs", {"type": "busy.job", "args": []}).status_code == 201  # the lock gone, it passes


def test_a_push_refused_in_maintenance_mode_is_logged_once_as_information_not_by_django_as_an_error(
    api, caplog
):
    """Maintenance mode's 503 is the refusal an operator asked for: one line each, at INFO, not an
    ERROR "Service Unavailable" from Django's request logger (which mails ``ADMINS``)."""
    api.post("/ojs/v1/admin/system/maintenance", {"enabled": True, "reason": "upgrade"})
    caplog.set_level(logging.INFO)
    refused = api.post("/ojs/v1/jobs", {"type": "busy.job", "args": []})
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "backend_unavailable"
    said = [(record.name, record.levelname, record.getMessage()) for record in caplog.records]
    assert not [line for line in said if line[0] == "django.request"], said
    request_id = refused.json()["error"]["request_id"]
    assert [line for line in said if request_id in line[2]] == [
        ("django_ojs.api", "INFO", f"POST /ojs/v1/jobs: 503, to be retried (request {request_id}): "
                                   f"{refused.json()['error']['message']}")
    ], said
    assert not Job.objects.exists()
