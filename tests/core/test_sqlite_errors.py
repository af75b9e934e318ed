"""A failed query on SQLite lets go of its cursor in its own thread (core/sqlite_errors.py).

Left in the reference cycle of Django's database error, the cursor was freed by the cyclic garbage
collector in whichever thread ran next; freeing it takes its connection's mutex, which that
connection holds while it waits out the busy timeout for the write lock. A thread holding the write
lock that collected it then waited for that timeout, and every writer with it.
"""

from __future__ import annotations

import contextlib
import gc
import sqlite3
import threading

import pytest
from django.db import OperationalError, connection, transaction

from django_ojs.handlers.context import JobContext

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's file lock and its connections' mutexes"),
]


def cursors_left_to_the_collector() -> list[sqlite3.Cursor]:
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [found for found in gc.garbage if isinstance(found, sqlite3.Cursor)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@contextlib.contextmanager
def locked_out(monkeypatch):
    """Another process's writer holds the lock; this thread's busy wait is cut short."""
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.1)
    connection.close()
    gc.collect()
    gc.disable()  # nothing collected behind the test's back
    shell = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    shell.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        shell.execute("COMMIT")
        shell.close()
        gc.enable()
        connection.close()


def test_a_progress_report_locked_out_leaves_no_cursor_for_another_thread_to_free(claim, monkeypatch):
    job = claim("w1")
    ctx = JobContext(job, "w1", beat=lambda: None)
    with locked_out(monkeypatch):
        reported = threading.Thread(target=ctx.progress, args=(0.5,))  # an executor thread's report
        reported.start()
        reported.join()
        assert cursors_left_to_the_collector() == []


def test_a_transaction_locked_out_leaves_no_cursor_for_the_collector(monkeypatch):
    with locked_out(monkeypatch):
        try:
            with transaction.atomic():
                pass
        except OperationalError as exc:
            assert "database is locked" in str(exc)
        else:
            pytest.fail("the transaction began though another writer held the lock")
        assert cursors_left_to_the_collector() == []
