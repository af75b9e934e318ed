"""The reaper's ``once`` loops (the cron-sync at start): run until they have reached the database once."""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError

from django_ojs.reaper import Loop, Reaper


def unavailable() -> OperationalError:
    error = OperationalError("connection refused")
    error.__cause__ = psycopg.OperationalError("connection failed: Connection refused")
    return error


# The reaper checks its connection around every loop (close_old_connections):
# a test database in autocommit mode, as the reaper process has.
@pytest.mark.django_db(transaction=True)
def test_a_once_loop_runs_until_it_succeeds_then_never_again_and_reports_no_false_recovery():
    calls = []
    database_up = [False]

    def sync(limit: int) -> int:
        calls.append(limit)
        if not database_up[0]:
            raise unavailable()
        return 0

    reaper = Reaper([Loop("cron-sync", sync, 1.0, once=True)], batch_size=10)
    reaper.tick(now=0.0)
    reaper.tick(now=1.0)
    assert len(calls) == 2 and reaper._outage.failures == 2
    database_up[0] = True
    reaper.tick(now=2.0)
    assert len(calls) == 3 and reaper._outage.failures == 0
    # Done: later ticks leave it alone, so while the database is away again
    # nothing "succeeds" and the outage is not reported over by a loop that
    # no longer touched the database.
    database_up[0] = False
    for second in range(3, 10):
        assert reaper.tick(now=float(second)) == {}
    assert len(calls) == 3
    # ...and it no longer sets the pace: the reaper sleeps until its other loops are due.
    reaper.loops.append(Loop("promote", lambda limit: 0, 0.5))
    reaper.tick(now=20.0)
    assert reaper.until_next(20.0) == 0.5

