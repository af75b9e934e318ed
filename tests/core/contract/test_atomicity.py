"""A move and its records commit together or not at all (DESIGN invariants 1 and 9).

A PostgreSQL trigger makes the event table refuse inserts, the way a full
disk or a broken constraint would: every move that records an event must
then fail as a whole and leave the job exactly as it was.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection

from django_ojs.core.types import Lease
from django_ojs.models import Job, JobError
from django_ojs.protocol.failure import Failure
from tests.helpers import ago, row, update

pytestmark = pytest.mark.postgres


@pytest.fixture
def break_event_store(transactional_db):
    def refuse_events() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE FUNCTION ojs_test_refuse_event() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'the event store is down'; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER ojs_test_refuse_event BEFORE INSERT ON django_ojs_event "
                "FOR EACH ROW EXECUTE FUNCTION ojs_test_refuse_event()"
            )

    yield refuse_events
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER IF EXISTS ojs_test_refuse_event ON django_ojs_event")
        cursor.execute("DROP FUNCTION IF EXISTS ojs_test_refuse_event()")


def in_state(state: str, spec) -> Job:
    options = {"queue": "atomic", "retry": {"max_attempts": 1 if state == "discarded" else 3}}
    if state == "pending":
        options["pending"] = True
    job = Job.objects.push(spec(options=options))
    if state in ("active", "discarded", "lapsed"):
        Job.objects.fetch(["atomic"], worker_id="w1")
    if state == "discarded":
        Job.objects.fail(job.id, Failure(type="E", message=""))
    if state == "lapsed":
        update(job, lease_expires_at=ago(seconds=1))
    if state == "expired":
        update(job, expires_at=ago(seconds=1))
    return Job.objects.get(pk=job.pk)


MOVES = {
    "fetch": ("available", lambda job: Job.objects.fetch(["atomic"], worker_id="w1")),
    "ack": ("active", lambda job: Job.objects.ack(job.id, lease=Lease(worker_id="w1"))),
    "fail": ("active", lambda job: Job.objects.fail(job.id, Failure(type="E", message=""))),
    "release": ("active", lambda job: Job.objects.fail(job.id, Failure(type="E", message=""), requeue=True)),
    "cancel": ("available", lambda job: Job.objects.cancel(job.id)),
    "manual retry": ("discarded", lambda job: Job.objects.resurrect(job.id)),
    "visibility timeout": ("lapsed", lambda job: Job.objects.requeue_lapsed(10)),
    "expiry": ("expired", lambda job: Job.objects.expire_overdue(10)),
}


@pytest.mark.parametrize("move", MOVES)
def test_a_move_whose_event_cannot_be_written_does_not_happen(break_event_store, spec, move):
    state, attempt = MOVES[move]
    job = in_state(state, spec)
    before, errors_before = row(job), JobError.objects.count()
    break_event_store()
    with pytest.raises(DatabaseError):
        attempt(job)
    assert row(job) == before
    assert JobError.objects.count() == errors_before


def test_a_push_whose_event_cannot_be_written_stores_nothing(break_event_store, spec):
    break_event_store()
    with pytest.raises(DatabaseError):
        Job.objects.push_many([spec(), spec()])
    assert not Job.objects.exists()
