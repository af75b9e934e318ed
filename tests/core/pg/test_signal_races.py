"""A signal racing a wait, a claim, a timeout or a cancel, with real concurrent transactions.

One thread runs a core move inside a transaction it keeps open, so the job's
row stays locked by that move; the signal (or the other move) runs in a
second thread on its own connection and must wait on the row -- seen in
``pg_stat_activity`` -- or skip it. When the first commits, the second sees
its outcome: the signal is applied exactly once, or refused with a 409.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.db import connections, transaction

from django_ojs.core.types import Lease
from django_ojs.models import Event, Job
from django_ojs.protocol.errors import InvalidTransition
from tests.helpers import ago, reload, update
from tests.waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.postgres]

HOUR = dt.timedelta(hours=1)


@pytest.fixture
def observer(transactional_db) -> Iterator[psycopg.Connection]:
    db = connections["default"].settings_dict
    conn = psycopg.connect(dbname=db["NAME"], host=db["HOST"] or None, port=db["PORT"] or None,
                           user=db["USER"] or None, password=db["PASSWORD"] or None, autocommit=True)
    yield conn
    conn.close()


@contextlib.contextmanager
def holding(move: Callable[[], Any]) -> Iterator[list[Any]]:
    """Run ``move`` in a transaction of another thread, kept open (its row locks held) until the block ends."""
    held, release, done = threading.Event(), threading.Event(), []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with transaction.atomic():
                done.append(move())
                held.set()
                assert release.wait(PATIENCE)
        except BaseException as exc:
            errors.append(exc)
            held.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    assert held.wait(PATIENCE)
    try:
        yield done
    finally:
        release.set()
        thread.join(PATIENCE)
    assert not errors, errors


class Running:
    """A core call in a thread of its own: its result, or its exception."""

    def __init__(self, call: Callable[[], Any]):
        self.result: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = call()
            except BaseException as exc:
                self.error = exc
            finally:
                connections.close_all()

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def join(self) -> Running:
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive()
        return self


def blocked(observer: psycopg.Connection) -> bool:
    """Is a session of this database waiting for a row lock?"""
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return bool(row and row[0])


def signalled_events(job: Job) -> int:
    return Event.objects.filter(job_id=job.id, type="job.signalled").count()


def test_a_signal_sent_while_the_job_parks_waits_for_the_park_and_wakes_it(claim, observer):
    job = claim("w1")
    with holding(lambda: Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1))):
        sending = Running(lambda: Job.objects.signal(job.id, "approved", 1))
        wait_until(lambda: blocked(observer), PATIENCE, "the signal to wait on the parking job's row")
    sending.join()
    assert sending.error is None
    stored = reload(job)
    assert (stored.state, stored.waiting_for, stored.signals["approved"]["payload"]) == ("available", None, 1)
    assert signalled_events(job) == 1


def test_a_wait_begun_while_the_signal_is_written_finds_it_and_does_not_park(claim, observer):
    job = claim("w1")
    with holding(lambda: Job.objects.signal(job.id, "approved", 2)):
        waiting = Running(lambda: Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1)))
        wait_until(lambda: blocked(observer), PATIENCE, "the wait to wait on the signalled job's row")
    waiting.join()
    assert waiting.error is None
    _, outcome = waiting.result
    assert (outcome.delivered, outcome.payload, reload(job).state) == (True, 2, "active")


def test_a_signal_sent_while_the_job_is_cancelled_is_409(claim, observer):
    job = claim("w1")
    Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1))
    with holding(lambda: Job.objects.cancel(job.id)):
        sending = Running(lambda: Job.objects.signal(job.id, "approved", 3))
        wait_until(lambda: blocked(observer), PATIENCE, "the signal to wait on the cancelled job's row")
    sending.join()
    assert isinstance(sending.error, InvalidTransition) and sending.error.current_state == "cancelled"
    assert not reload(job).signals and signalled_events(job) == 0


def test_a_claim_skips_a_job_being_signalled_and_takes_it_once_it_is_woken(claim, observer):
    job = claim("w1")
    Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1))
    with holding(lambda: Job.objects.signal(job.id, "approved", 4)):
        # The wake is not committed yet, and FETCH never waits on a locked row.
        assert Running(lambda: Job.objects.fetch([job.queue], worker_id="w2")).join().result == []
    [claimed] = Job.objects.fetch([job.queue], worker_id="w2")
    assert (claimed.id, claimed.attempt, claimed.signals["approved"]["payload"]) == (job.id, 2, 4)


def test_a_signal_sent_while_the_job_is_claimed_is_stored_for_its_wait(claim, observer):
    job = claim("w1")
    Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1))
    update(job, run_at=ago(seconds=1))  # its deadline came: the timeout's promotion
    Job.objects.promote_due(10)
    with holding(lambda: Job.objects.fetch([job.queue], worker_id="w2")) as claimed:
        sending = Running(lambda: Job.objects.signal(job.id, "approved", 5))
        wait_until(lambda: blocked(observer), PATIENCE, "the signal to wait on the claimed job's row")
    sending.join()
    assert sending.error is None and claimed[0][0].attempt == 2
    _, outcome = Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w2", 2))
    assert (outcome.delivered, outcome.payload) == (True, 5)
    assert signalled_events(job) == 1


def test_a_signal_and_the_timeouts_promotion_wake_the_job_once(claim, observer):
    job = claim("w1")
    Job.objects.wait(job.id, "approved", HOUR, lease=Lease("w1", 1))
    update(job, run_at=ago(seconds=1))
    with holding(lambda: Job.objects.signal(job.id, "approved", 6)):
        # The reaper's promotion skips the row the signal holds: no second wake.
        assert Running(lambda: Job.objects.promote_due(10)).join().result == 0
    assert Job.objects.promote_due(10) == 0
    stored = reload(job)
    assert (stored.state, signalled_events(job)) == ("available", 1)
    assert Event.objects.filter(job_id=job.id, type="job.enqueued").count() == 1  # its push only
