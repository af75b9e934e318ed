"""django_ojs.observe.outage: what counts as the database being away, and logging an outage once."""

from __future__ import annotations

import logging
import sqlite3

import psycopg
import psycopg.errors
import pytest
from django.db import InterfaceError, OperationalError, ProgrammingError

from django_ojs.observe import outage
from django_ojs.observe.outage import OutageWatch, is_unavailable, retry_on_new_connection


def wrapped(driver_error: Exception, django_class: type[Exception] = OperationalError) -> Exception:
    """What Django raises: its own class, with the driver's error as the cause."""
    error = django_class(str(driver_error))
    error.__cause__ = driver_error
    return error


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("connection failed: Connection refused"),  # no SQLSTATE: no server answered
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CrashShutdown("terminating connection because of crash of another server process"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.errors.TooManyConnections("sorry, too many clients already"),
        psycopg.errors.lookup("08006")("connection failure"),
        psycopg.InterfaceError("the connection is closed"),
        sqlite3.OperationalError("unable to open database file"),
    ],
    ids=lambda error: type(error).__name__ + ":" + str(error)[:20],
)
def test_errors_that_mean_the_database_is_away(error):
    assert is_unavailable(error)
    assert is_unavailable(
        wrapped(error, InterfaceError if "Interface" in type(error).__name__ else OperationalError)
    )


@pytest.mark.parametrize(
    "error",
    [
        wrapped(psycopg.errors.DeadlockDetected("deadlock detected")),
        wrapped(psycopg.errors.SerializationFailure("could not serialize access")),
        wrapped(psycopg.errors.QueryCanceled("canceling statement due to statement timeout")),
        wrapped(psycopg.errors.UndefinedTable("relation does not exist"), ProgrammingError),
        wrapped(sqlite3.OperationalError("database is locked")),
        wrapped(sqlite3.OperationalError("no such table: django_ojs_job")),
        OperationalError("raised by Django itself"),
        ValueError("not a database error"),
    ],
    ids=str,
)
def test_errors_that_are_not_an_outage(error):
    assert not is_unavailable(error)


def test_django_interface_error_means_the_connection_is_gone():
    assert is_unavailable(InterfaceError("connection already closed"))


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(outage.time, "monotonic", lambda: now[0])
    return now


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(caplog, clock):
    watch = OutageWatch("heartbeat", logging.getLogger("test.outage"))
    down = psycopg.OperationalError("connection failed: Connection refused\n\tIs the server running?")
    with caplog.at_level(logging.INFO, logger="test.outage"):
        for _ in range(20):
            assert watch.failed(down)
            clock[0] += 0.5
        assert not watch.settled(0) and watch.failures == 20
        watch.succeeded()
        watch.succeeded()
    assert [record.getMessage() for record in caplog.records] == [
        "heartbeat: database unavailable (connection failed: Connection refused); retrying until it is back",
        "heartbeat: database available again after 10.0s",
    ]
    assert watch.settled(0) and watch.failures == 0


def test_a_second_outage_is_logged_again(caplog):
    watch = OutageWatch("reaper", logging.getLogger("test.outage"), meanwhile="waiting")
    with caplog.at_level(logging.INFO, logger="test.outage"):
        for _ in range(2):
            watch.failed(psycopg.errors.AdminShutdown("terminating connection"))
            watch.succeeded()
    messages = [record.getMessage() for record in caplog.records]
    assert [message.split(" (")[0].split(" after")[0] for message in messages] == [
        "reaper: database unavailable",
        "reaper: database available again",
    ] * 2
    assert messages[0].endswith("; waiting")


def test_other_database_errors_are_left_to_the_caller(caplog):
    watch = OutageWatch("worker", logging.getLogger("test.outage"))
    with caplog.at_level(logging.INFO, logger="test.outage"):
        assert not watch.failed(wrapped(psycopg.errors.DeadlockDetected("deadlock detected")))
        watch.succeeded()
    assert caplog.records == []
    assert watch.failures == 0 and watch.settled(0)


def test_a_call_that_lost_its_connection_is_tried_once_more(monkeypatch):
    # A unit test has no database: record that the dead connection is dropped
    # before the second try rather than let Django touch a real one (whether a
    # connection is open here depends on which tests ran before). Reconnecting
    # for real is tested against a restarted PostgreSQL in tests/chaos/test_outage.py.
    calls = []
    monkeypatch.setattr(outage, "close_old_connections", lambda: calls.append("reconnect"))

    def beat():
        calls.append("beat")
        if len(calls) == 1:
            raise wrapped(psycopg.errors.AdminShutdown("terminating connection due to administrator command"))
        return "written"

    assert retry_on_new_connection(beat) == "written"
    assert calls == ["beat", "reconnect", "beat"]


def test_other_errors_are_not_retried():
    calls = []

    def fail():
        calls.append(1)
        raise wrapped(psycopg.errors.DeadlockDetected("deadlock detected"))

    with pytest.raises(OperationalError):
        retry_on_new_connection(fail)
    assert len(calls) == 1


def test_settled_only_some_time_after_an_outage_ended(clock):
    watch = OutageWatch("reaper", logging.getLogger("test.outage"))
    assert watch.settled(3.0)  # no outage seen
    watch.failed(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert not watch.settled(3.0)
    clock[0] += 10
    watch.succeeded()
    clock[0] += 2.9
    assert not watch.settled(3.0)
    clock[0] += 0.2
    assert watch.settled(3.0)


@pytest.mark.parametrize(
    "driver_error, status, code",
    [
        (
            psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
            503,
            "backend_unavailable",
        ),
        (psycopg.OperationalError("connection failed: Connection refused"), 503, "backend_unavailable"),
        (psycopg.errors.DeadlockDetected("deadlock detected"), 500, "backend_error"),
        # Contention past SQLite's busy timeout: the database answers, the client may retry at once.
        (sqlite3.OperationalError("database is locked"), 503, "backend_unavailable"),
    ],
    ids=["admin shutdown", "refused", "deadlock", "sqlite locked"],
)
def test_the_api_says_503_with_retry_after_only_when_the_database_is_away(driver_error, status, code, caplog):
    from django.utils.log import log_response

    from django_ojs.api.errors import exception_handler

    response = exception_handler(wrapped(driver_error), {})
    error = response.data["error"]
    assert (response.status_code, error["code"], error["retryable"]) == (status, code, True)
    busy = "locked" in str(driver_error)
    assert response.get("Retry-After") == ("1" if busy else "5" if status == 503 else None)
    # As Django's handler ends every request: the 503s were logged by django-ojs (an outage once for its
    # whole length), so Django's request logger does not add an ERROR of its own; a 500 it still does.
    with caplog.at_level(logging.INFO, logger="django.request"):
        log_response("%s: %s", response.reason_phrase, "/ojs/v1/jobs", response=response)
    assert [r.levelname for r in caplog.records if r.name == "django.request"] == ([] if status == 503 else ["ERROR"])


def test_a_prepared_statement_gone_astray_is_said_to_be_a_pooler_not_just_an_outage(caplog):
    """Behind PgBouncer in transaction mode without the flag, prepared statements fail in ways the
    driver reports as a protocol error: the log line names the setting, not only an outage."""
    error = wrapped(psycopg.errors.lookup("08P01")(
        'bind message supplies 8 parameters, but prepared statement "_pg3_0" requires 10'))
    watch = OutageWatch("worker", logging.getLogger("test.outage"))
    with caplog.at_level(logging.WARNING, logger="test.outage"):
        assert watch.failed(error)
    assert "DISABLE_SERVER_SIDE_CURSORS" in caplog.text and "pgbouncer.md" in caplog.text
    assert "DISABLE_SERVER_SIDE_CURSORS" not in outage.summary(wrapped(psycopg.errors.AdminShutdown("shutdown")))
