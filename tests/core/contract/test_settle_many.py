"""The in-process worker's batched outcomes: Job.objects.settle_many and settle_and_fetch.

A worker writes its finished attempts -- completions and failures -- in one
transaction that locks every row of the batch in ``seq`` order first, so
two batches, or a batch and the worker's own heartbeat, cannot deadlock
(DESIGN invariant 11), and it settles exactly the attempts it names
(invariant 12).
"""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
from django.db import connections

from django_ojs.core import settle
from django_ojs.core.types import Lease, Settlement, Verdict
from django_ojs.models import Job, Worker
from django_ojs.protocol.failure import Failure
from tests.helpers import ago, history, holding, race, reload, update

BOOM = Failure(type="Boom", message="it broke", retryable=True)


def test_settle_many_completes_and_fails_held_attempts_and_refuses_lost_ones(claim):
    held = claim("w1")
    held_without_result = claim("w1")
    failed = claim("w1", retry={"max_attempts": 3})
    owned_by_other = claim("w2")
    reaped = claim("w1")
    update(reaped, lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    verdicts = Job.objects.settle_many([
        Settlement(held.id, Lease("w1", 1), result={"n": 1}),
        Settlement(held_without_result.id, Lease("w1")),
        Settlement(failed.id, Lease("w1", 1), failure=BOOM),
        Settlement(owned_by_other.id, Lease("w1"), result="stolen"),
        Settlement(reaped.id, Lease("w1", 1), result="late"),
        Settlement(uuid.uuid4(), Lease("w1")),
    ])
    assert verdicts == [Verdict.COMPLETED, Verdict.COMPLETED, Verdict.FAILED,
                        Verdict.REFUSED, Verdict.REFUSED, Verdict.REFUSED]
    assert (reload(held).state, reload(held).result) == ("completed", {"n": 1})
    assert (reload(held_without_result).state, reload(held_without_result).result) == ("completed", None)
    assert reload(failed).state == "retryable"
    assert history(failed) == [(1, "Boom")]
    assert (reload(owned_by_other).state, reload(owned_by_other).result) == ("active", None)
    assert reload(reaped).state == "available"


def test_a_batch_sent_again_after_its_commit_is_refused_and_known_as_written_by_its_own_lease(claim):
    """A turn whose COMMIT went through while its reply was lost is sent again: refused, the attempts
    being settled -- by that very batch, which ``written_before`` tells from a job taken away."""
    done, failed, recovered, cancelled = (claim("w1", retry={"max_attempts": 3}) for _ in range(4))
    update(recovered, lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)  # the reaper's: an error for its attempt, not the worker's
    Job.objects.cancel(cancelled.id)
    failure = Failure(type="Boom", message="it broke", retryable=True, details={"worker_id": "w1"})
    batch = [Settlement(done.id, Lease("w1", 1), result={"n": 1}), Settlement(failed.id, Lease("w1", 1), failure=failure),
             Settlement(recovered.id, Lease("w1", 1), result="late"), Settlement(cancelled.id, Lease("w1", 1))]
    assert Job.objects.settle_many(batch) == [Verdict.COMPLETED, Verdict.FAILED, Verdict.REFUSED, Verdict.REFUSED]
    assert Job.objects.settle_many(batch) == [Verdict.REFUSED] * 4  # sent again
    assert settle.written_before(batch) == [True, True, False, False]
    # Another worker's lease is not this one's, though the job completed at that attempt.
    assert settle.written_before([Settlement(done.id, Lease("w2", 1))]) == [False]


def test_a_requeued_failure_releases_the_job_without_charging_the_attempt(claim):
    job = claim("w1", retry={"max_attempts": 1})
    assert Job.objects.settle_many([Settlement(job.id, Lease("w1", 1), failure=BOOM, requeue=True)]) == [
        Verdict.FAILED]
    stored = reload(job)
    assert (stored.state, stored.attempt, stored.releases) == ("available", 1, 1)


@pytest.mark.parametrize("result", ["text", "", 0, False, [1], {"a": None}])
def test_settle_many_stores_any_json_result(claim, result):
    job = claim("w1")
    Job.objects.settle_many([Settlement(job.id, Lease("w1"), result=result)])
    assert reload(job).result == result


def test_a_stale_attempt_in_the_batch_leaves_the_later_attempt_to_its_own_settlement(claim):
    """Attempt 1 was recovered and the same worker claimed attempt 2; both finish in one batch."""
    first = claim("w1")
    update(first, lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    [second] = Job.objects.fetch([first.queue], worker_id="w1")
    verdicts = Job.objects.settle_many([
        Settlement(first.id, Lease("w1", 1), result="old"),
        Settlement(second.id, Lease("w1", 2), result="new"),
    ])
    assert verdicts == [Verdict.REFUSED, Verdict.COMPLETED]
    assert (reload(second).state, reload(second).result) == ("completed", "new")


def test_an_attempt_named_twice_is_settled_once(claim):
    job = claim("w1")
    verdicts = Job.objects.settle_many([
        Settlement(job.id, Lease("w1", 1), result=1),
        Settlement(job.id, Lease("w1", 1), failure=BOOM),
    ])
    assert verdicts == [Verdict.COMPLETED, Verdict.REFUSED]
    assert (reload(job).state, history(job)) == ("completed", [])


def test_settle_many_of_nothing_does_nothing(db):
    assert Job.objects.settle_many([]) == []


def test_settle_and_fetch_writes_outcomes_then_claims_for_the_free_slots(push):
    Worker.objects.register("w1")
    first = push(options={"queue": "turn"})
    push(options={"queue": "turn"})
    [claimed] = Job.objects.fetch(["turn"], worker_id="w1")
    verdicts, jobs = Job.objects.settle_and_fetch(
        "w1", [Settlement(claimed.id, Lease("w1", 1), result="ok")], ["turn"], 5)
    assert verdicts == [Verdict.COMPLETED]
    assert claimed.id == first.id and reload(first).state == "completed"
    assert [job.state for job in jobs] == ["active"]


@pytest.mark.postgres
def test_two_batches_naming_the_same_rows_in_opposite_orders_never_deadlock(transactional_db, spec):
    """A zombie worker and the worker that re-claimed its jobs write outcomes for the same rows.

    Each batch names the rows in the opposite order; both lock in seq order,
    so one waits for the other instead of PostgreSQL killing one of them.
    """
    for _ in range(20):
        jobs = Job.objects.push_many([spec(options={"queue": "zombie"}) for _ in range(6)])
        Job.objects.fetch(["zombie"], count=6)
        forward = [Settlement(job.id, Lease(), failure=BOOM if n % 2 else None) for n, job in enumerate(jobs)]
        backward = [Settlement(job.id, Lease(), failure=BOOM if n % 2 else None)
                    for n, job in reversed(list(enumerate(jobs)))]
        outcomes: list[list[Verdict]] = []
        race([lambda out=outcomes, batch=forward: out.append(Job.objects.settle_many(batch)),
              lambda out=outcomes, batch=backward: out.append(Job.objects.settle_many(batch))])
        # Each attempt was settled by exactly one of the two batches.
        settled = [sum(verdict is not Verdict.REFUSED for verdict in column) for column in zip(*outcomes)]
        assert settled == [1] * 6


@pytest.mark.postgres
def test_a_heartbeat_and_its_workers_batch_never_deadlock(transactional_db, spec):
    """The defect a chaos run found: the heartbeat's lease extension and the worker's own
    ACK/FAIL batch locked the same rows in different orders; PostgreSQL killed the
    heartbeat and the reaper declared a live worker dead. Run both side by side many
    times: neither may fail."""
    Worker.objects.register("w1")
    stop = threading.Event()
    errors: list[BaseException] = []

    def beat_continuously() -> None:
        try:
            while not stop.is_set():
                held = holding(*Job.objects.filter(state="active", worker_id="w1"))
                Worker.objects.beat("w1", held=list(reversed(held)))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    beater = threading.Thread(target=beat_continuously)
    beater.start()
    try:
        for _ in range(40):
            Job.objects.push_many([spec(options={"queue": "hb"}) for _ in range(10)])
            claimed = Job.objects.fetch(["hb"], count=10, worker_id="w1")
            Job.objects.settle_and_fetch(
                "w1",
                [Settlement(job.id, Lease("w1", job.attempt), failure=BOOM if n % 3 == 0 else None)
                 for n, job in enumerate(claimed)],
                ["hb"],
                0,
            )
    finally:
        stop.set()
        beater.join(60)
    assert not errors, errors


@pytest.mark.postgres
def test_a_turn_locks_its_workers_row_before_any_job_of_its_batch(transactional_db, spec):
    """DESIGN invariant 11 inside one statement: while another transaction holds the worker's
    row (as the reaper does to declare it dead), the turn waits on that row having locked no
    job of its batch -- so the other may go on to lock those jobs without a deadlock."""
    from tests.waiting import wait_until

    Worker.objects.register("w1")
    Job.objects.push_many([spec(options={"queue": "order"}) for _ in range(3)])
    claimed = Job.objects.fetch(["order"], count=3, worker_id="w1")
    batch = [Settlement(job.id, Lease("w1", 1), result=1) for job in claimed]
    db = connections["default"].settings_dict
    where = {"dbname": db["NAME"], "host": db["HOST"] or None, "port": db["PORT"] or None,
             "user": db["USER"] or None, "password": db["PASSWORD"] or None}
    reaper, observer = psycopg.connect(**where), psycopg.connect(**where, autocommit=True)
    outcome: list = []
    turn = threading.Thread(target=lambda: outcome.append(_turn_closing("w1", batch)))
    try:
        reaper.execute("SELECT 1 FROM django_ojs_worker WHERE id = 'w1' FOR UPDATE")
        turn.start()
        wait_until(lambda: _waiting_on_a_lock(observer, "FOR KEY SHARE"), 60, "the turn to wait on the worker's row")
        # Every job of the batch is still free to lock: NOWAIT would fail on a row the turn held.
        locked = reaper.execute(
            "SELECT count(*) FROM (SELECT 1 FROM django_ojs_job WHERE id = ANY(%s) FOR UPDATE NOWAIT) held",
            [[job.id for job in claimed]],
        ).fetchone()[0]
        assert locked == 3
        reaper.rollback()
        turn.join(60)
        assert outcome and outcome[0][0] == [Verdict.COMPLETED] * 3
    finally:
        reaper.close()
        observer.close()
        turn.join(60)


def _turn_closing(worker_id, batch):
    try:
        return Job.objects.settle_and_fetch(worker_id, batch, ["order"], 1)
    finally:
        connections.close_all()


def _waiting_on_a_lock(observer, statement_part: str) -> bool:
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s"
        " AND datname = current_database()",
        [f"%{statement_part}%"],
    ).fetchone()
    return row[0] > 0
