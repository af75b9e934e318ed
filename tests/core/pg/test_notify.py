"""The ``ojs_available`` notifications idle workers LISTEN for (migrations 0002 and 0011).

An INSERT notifies each queue that got an available job once (a statement
trigger); an UPDATE that makes a job available notifies its queue (a row
trigger). Listened to as ``worker/listener.py`` does, on a connection of its
own; a sentinel NOTIFY committed after the move marks the end of what the
move sent (PostgreSQL delivers notifications in commit order), so nothing
here waits for a time to pass.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

import django_ojs
from django_ojs.core import queues
from django_ojs.models import Job
from django_ojs.worker.listener import CHANNEL
from tests.helpers import pg_session

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

END = "-- end of the move --"


@pytest.fixture
def heard():
    """``heard(move)``: the payloads of ``ojs_available`` that ``move()`` caused, in order."""
    listener = pg_session(autocommit=True)
    listener.execute(f"LISTEN {CHANNEL}")

    def during(move) -> list[str]:
        move()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, END])
        payloads = []
        for notice in listener.notifies():
            if notice.payload == END:
                return payloads
            payloads.append(notice.payload)
        raise AssertionError("the listening connection closed")

    yield during
    listener.close()


def test_a_batch_notifies_each_of_its_queues_once(heard):
    jobs = [{"type": "t.a", "args": [], "queue": queue} for queue in ("left", "right", "left", "left")]
    assert sorted(heard(lambda: django_ojs.enqueue_many(jobs))) == ["left", "right"]


def test_one_enqueue_notifies_its_queue(heard):
    assert heard(lambda: django_ojs.enqueue("t.a", [], queue="solo")) == ["solo"]


def test_jobs_that_are_not_available_notify_nobody_until_they_are(heard):
    pending = {"type": "t.a", "args": [], "queue": "later", "pending": True}
    scheduled = {"type": "t.a", "args": [], "queue": "later", "scheduled_at": "2099-01-01T00:00:00Z"}
    stored = []
    assert heard(lambda: stored.extend(django_ojs.enqueue_many([pending, scheduled]))) == []
    # The row trigger: an UPDATE that makes a job available wakes its queue.
    assert heard(lambda: Job.objects.activate(stored[0].id)) == ["later"]


def test_a_statement_of_both_kinds_notifies_only_the_available_queue(heard):
    jobs = [
        {"type": "t.a", "args": [], "queue": "now"},
        {"type": "t.a", "args": [], "queue": "then", "pending": True},
    ]
    assert heard(lambda: django_ojs.enqueue_many(jobs)) == ["now"]


def test_nothing_is_heard_from_a_transaction_rolled_back(heard):
    def rolled_back():
        with transaction.atomic():
            django_ojs.enqueue("t.a", [], queue="undone")
            transaction.set_rollback(True)

    assert heard(rolled_back) == []


def test_resuming_a_queue_notifies_it_and_pausing_does_not(heard):
    """Its waiting jobs can be had again: idle workers wake at once, not at their next poll."""
    assert heard(lambda: django_ojs.enqueue("t.a", [], queue="held")) == ["held"]
    assert heard(lambda: queues.pause("held")) == []
    assert heard(lambda: queues.resume("held")) == ["held"]
