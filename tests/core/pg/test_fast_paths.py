"""The PostgreSQL engine's one-statement PUSH, FETCH, ACK and turn (core/pg).

They must store and claim exactly what the stepwise paths do, in one
statement, and hand every case they do not decide to those paths.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_ojs.core import workflows as store
from django_ojs.core.pg import push as fastpush
from django_ojs.core.types import Lease
from django_ojs.models import Event, Job, Queue, Worker
from django_ojs.protocol.durations import to_millis
from django_ojs.protocol.errors import Duplicate, InvalidTransition
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.workflows import parse
from tests.core.contract.test_fetch import fetched_args
from tests.helpers import reload

pytestmark = [
    pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queue_settings_cached"),
]


# What differs between two pushes of one spec: identity and the clock.
_PER_PUSH = {"seq", "id", "created_at", "enqueued_at"}


def stored(job: Job) -> dict:
    return {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields if f.attname not in _PER_PUSH}


def statements(operation) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        operation()
    return [q["sql"] for q in queries.captured_queries]


def test_a_plain_push_is_one_statement_outside_a_transaction(spec):
    Job.objects.push(spec(options={"queue": "fast"}))  # the queue's row, once per process
    sql = statements(lambda: Job.objects.push(spec(options={"queue": "fast"}, args=[1])))
    assert len(sql) == 1 and sql[0].startswith("WITH inserted AS (INSERT"), sql


def test_a_plain_push_stores_what_the_stepwise_push_stores(spec, monkeypatch):
    body = {
        "type": "mail.send", "args": ["a", {"b": [1, 2.5, None]}], "meta": {"m": "é"},
        "options": {"queue": "q1", "priority": 7, "timeout": 12.5, "visibility_timeout": 90,
                    "tags": ["x"], "expires_at": "2999-01-01T00:00:00.123Z",
                    "retry": {"max_attempts": 5, "initial_interval": "PT2S"},
                    "rate_limit": {"key": "k", "concurrency": 2}},
    }
    fast = Job.objects.push(spec(**body))
    monkeypatch.setattr(fastpush, "all_plain", lambda specs: False)
    stepwise = Job.objects.push(spec(**body))
    assert stored(fast) == stored(stepwise)
    assert stored(reload(fast)) == stored(reload(stepwise)) == stored(stepwise)
    assert fast.created_at == fast.enqueued_at == reload(fast).created_at
    [event] = Event.objects.filter(job_id=fast.id)
    [twin] = Event.objects.filter(job_id=stepwise.id)
    assert (event.type, event.time, event.queue) == ("job.enqueued", fast.created_at, "q1")
    assert event.data == {**twin.data, "job_id": str(fast.id)}


def test_a_batch_keeps_its_order(spec):
    jobs = Job.objects.push_many([spec(args=[n], options={"queue": "order"}) for n in range(50)])
    assert [job.args for job in jobs] == [[n] for n in range(50)]
    assert [job.seq for job in jobs] == sorted(job.seq for job in jobs)
    assert [job.args for job in Job.objects.filter(queue="order").order_by("seq")] == [[n] for n in range(50)]


def test_a_taken_id_outside_a_transaction_is_a_duplicate_and_stores_nothing(spec):
    first = Job.objects.push(spec(id="01900000-0000-7000-8000-000000000001"))
    batch = [spec(args=[1]), spec(id=str(first.id), args=[2])]
    with pytest.raises(Duplicate) as refused:
        Job.objects.push_many(batch)
    assert refused.value.details["existing_job_id"] == str(first.id)
    assert Job.objects.count() == 1 and Event.objects.filter(type="job.enqueued").count() == 1


def test_a_taken_id_inside_a_transaction_leaves_it_usable(spec):
    first = Job.objects.push(spec())
    with transaction.atomic():
        with pytest.raises(Duplicate):
            Job.objects.push(spec(id=str(first.id)))
        Job.objects.push(spec(args=["after"]))
    assert Job.objects.count() == 2


def test_enqueue_in_the_callers_transaction_is_one_statement_and_commits_with_it():
    """A view enqueueing a job in its transaction: enqueue made the id, so nothing can have
    it and no savepoint guards the statement (three round trips were one)."""
    import django_ojs

    django_ojs.enqueue("fast.view", [0], queue="fast")  # the queue's row, once per process
    with transaction.atomic():
        sql = statements(lambda: django_ojs.enqueue("fast.view", [1], queue="fast"))
        assert len(sql) == 1 and sql[0].startswith("WITH inserted AS (INSERT"), sql
        with pytest.raises(RuntimeError), transaction.atomic():
            django_ojs.enqueue("fast.view", [2], queue="fast")
            raise RuntimeError("the caller's inner block fails")
    assert sorted(job.args for job in Job.objects.filter(type="fast.view")) == [[0], [1]]


def test_a_chosen_id_in_the_callers_transaction_is_still_guarded_by_a_savepoint(spec):
    Job.objects.push(spec())  # the queue's row, once per process
    with transaction.atomic():
        sql = statements(lambda: Job.objects.push(spec(id="01900000-0000-7000-8000-0000000000aa")))
    # The id probed first: a finished job may hold it, out of the live partition's unique index.
    assert [statement.split()[0] for statement in sql] == ["SAVEPOINT", "SELECT", "WITH", "RELEASE"], sql


def test_jobs_that_need_deciding_take_the_stepwise_push(spec):
    assert fastpush.is_plain(spec())
    assert not fastpush.is_plain(spec(options={"scheduled_at": "2999-01-01T00:00:00Z"}))
    assert not fastpush.is_plain(spec(options={"pending": True}))
    assert not fastpush.is_plain(spec(options={"unique": {"keys": ["type"]}}))
    assert not fastpush.is_plain(spec(options={"expires_at": "+PT1H"}))


def test_a_fetch_of_a_plain_queue_is_one_statement(push):
    Worker.objects.register("w1")
    jobs = [push(options={"queue": "one", "priority": p}) for p in (0, 5, 0)]
    Job.objects.fetch(["one"], count=1, worker_id="w1")  # reads the queue's settings, then cached
    sql = statements(lambda: Job.objects.fetch(["one"], count=2, worker_id="w1"))
    assert len(sql) == 1 and "FOR KEY SHARE" in sql[0] and "FOR UPDATE SKIP LOCKED" in sql[0], sql
    assert reload(jobs[2]).state == "active"


def test_the_fast_claim_writes_what_the_stepwise_claim_writes(push):
    Worker.objects.register("w1")
    job = push(options={"queue": "same", "priority": 3, "timeout": 60})
    [claimed] = Job.objects.fetch(["same"], worker_id="w1")
    row = reload(job)
    assert stored(claimed) == stored(row)
    assert (row.state, row.attempt, row.worker_id) == ("active", 1, "w1")
    assert row.lease_expires_at == row.started_at + row.visibility_timeout
    assert row.deadline_at == row.started_at + row.timeout
    [started] = Event.objects.filter(job_id=job.id, type="job.started")
    assert started.time == row.started_at
    assert started.data == {"job_id": str(job.id), "job_type": job.type, "queue": "same", "state": "active",
                            "attempt": 1, "worker_id": "w1"}


def test_a_rate_keyed_job_first_in_line_keeps_its_place(push):
    keyed = push(options={"queue": "mix", "priority": 9, "rate_limit": {"key": "k", "concurrency": 5}})
    plain = push(options={"queue": "mix"})
    assert [job.id for job in Job.objects.fetch(["mix"], count=2)] == [keyed.id, plain.id]


def test_an_expired_job_first_in_line_is_discarded_and_the_next_claimed(push):
    expired = push(options={"queue": "exp", "priority": 9, "expires_at": "2000-01-01T00:00:00Z"})
    fresh = push(options={"queue": "exp"})
    assert [job.id for job in Job.objects.fetch(["exp"])] == [fresh.id]
    assert reload(expired).state == "discarded"


def test_an_ack_is_one_statement_and_writes_what_the_stepwise_ack_wrote(push):
    job = push(options={"queue": "acks"})
    [claimed] = Job.objects.fetch(["acks"], worker_id="w1")
    sql = statements(lambda: Job.objects.ack(claimed.id, result={"n": [1, "é"]}, lease=Lease("w1", 1)))
    # One statement, a transaction of its own: no BEGIN, no COMMIT.
    assert len(sql) == 1 and sql[0].startswith("WITH acked AS (UPDATE"), sql
    row = reload(job)
    assert (row.state, row.result, row.error, row.lease_expires_at, row.deadline_at) == (
        "completed", {"n": [1, "é"]}, None, None, None)
    assert row.completed_at == row.finished_at > row.started_at
    [done] = Event.objects.filter(job_id=job.id, type="job.completed")
    assert done.time == row.completed_at
    assert done.data == {"job_id": str(job.id), "job_type": job.type, "queue": "acks", "state": "completed",
                         "attempt": 1, "duration_ms": to_millis(row.completed_at - row.started_at)}


def test_an_ack_under_another_lease_is_refused_and_changes_nothing(push):
    job = push(options={"queue": "acks"})
    Job.objects.fetch(["acks"], worker_id="w1")
    for lease in (Lease("w2", None), Lease(None, 2)):
        with pytest.raises(InvalidTransition):
            Job.objects.ack(job.id, lease=lease)
    assert reload(job).state == "active"
    assert not Event.objects.filter(job_id=job.id, type="job.completed").exists()
    assert Job.objects.ack(job.id, result=None, lease=Lease("w1", 1)).result is None


def test_a_workflow_steps_ack_moves_its_workflow_in_the_same_transaction(db):
    workflow = store.create(parse({"type": "chain", "name": "two", "steps": [
        {"type": "a", "args": [], "options": {"queue": "steps"}},
        {"type": "b", "args": [], "options": {"queue": "steps"}}]}, max_jobs=10, job_options=store.job_options()))
    [step] = Job.objects.fetch(["steps"], worker_id="w1")
    sql = statements(lambda: Job.objects.ack(step.id, result=1, lease=Lease("w1", 1)))
    # The one-statement ACK leaves a step alone; the ACK in a transaction acks it and starts the next step.
    assert sql[1] == "BEGIN" and sql[-1] == "COMMIT", sql
    assert "workflow_id" in sql[0] and "workflow_id" not in sql[2], sql
    assert reload(step).state == "completed"
    [second] = Job.objects.filter(queue="steps", state="available")
    assert (second.type, second.extra["workflow_id"]) == ("b", str(workflow.id))
    assert Event.objects.filter(job_id=step.id, type="job.completed").count() == 1


def _running(push, queue: str, count: int, *, more: int = 0, worker: str = "w1"):
    Worker.objects.register(worker)
    for n in range(count + more):
        push(args=[n], options={"queue": queue})
    return Job.objects.fetch([queue], count=count, worker_id=worker)


def _finished(running, *, worker: str = "w1"):
    from django_ojs.core.types import Settlement

    return [Settlement(job.id, Lease(worker, job.attempt), result=n) for n, job in enumerate(running)]


def test_a_worker_turn_is_one_statement(push):
    """Hold the worker's row, then lock the finished jobs (and see which are workflow steps), complete
    them with their events, claim anew: one statement, a transaction of its own (core/pg/turn.py)."""
    running = _running(push, "turns", 3, more=2)
    sql = statements(lambda: done.append(Job.objects.settle_and_fetch("w1", _finished(running), ["turns"], 2)))
    [(verdicts, claimed)] = done
    assert len(sql) == 1, sql
    [turn] = sql
    # DESIGN invariant 11: the worker's row, then the batch (waiting, in seq order), then new jobs (skipping).
    assert turn.index("FOR KEY SHARE") < turn.index("ORDER BY j.seq FOR UPDATE") < turn.index("SKIP LOCKED"), turn
    assert "django_ojs_workflownode" in turn
    assert [verdict.value for verdict in verdicts] == ["completed"] * 3 and len(claimed) == 2
    assert [reload(job).result for job in running] == [0, 1, 2]
    assert Event.objects.filter(type="job.completed").count() == 3
    assert {(job.state, job.worker_id, job.attempt) for job in map(reload, claimed)} == {("active", "w1", 1)}


done: list = []


@pytest.fixture(autouse=True)
def _forget_turns():
    done.clear()


def test_the_one_statement_turn_writes_what_the_stepwise_turn_writes(push, monkeypatch):
    from django_ojs.core.pg import turn as fastturn

    def turn_on(queue: str):
        running = _running(push, queue, 2, more=1)
        verdicts, claimed = Job.objects.settle_and_fetch("w1", _finished(running), [queue], 1)
        return running, verdicts, claimed

    fast = turn_on("fast-turn")
    monkeypatch.setattr(fastturn, "applies", lambda worker_id, settlements: False)
    stepwise = turn_on("slow-turn")
    assert fast[1] == stepwise[1]
    differ = _PER_PUSH | {"queue", "started_at", "completed_at", "finished_at", "lease_expires_at", "deadline_at"}
    pairs = [(mine, theirs, ("job.started", "job.completed")) for mine, theirs in zip(fast[0], stepwise[0])]
    pairs += [(mine, theirs, ("job.started",)) for mine, theirs in zip(fast[2], stepwise[2], strict=True)]
    for mine, theirs, kinds in pairs:
        row, twin = reload(mine), reload(theirs)
        assert {k: v for k, v in stored(row).items() if k not in differ} == {
            k: v for k, v in stored(twin).items() if k not in differ}
        for kind in kinds:
            events = [(e.data, e.time) for e in Event.objects.filter(job_id=row.id, type=kind)]
            twins = [e.data for e in Event.objects.filter(job_id=twin.id, type=kind)]
            same = {"queue": "q", "job_id": "j", "duration_ms": 0}  # what differs between the two runs
            assert [data | same for data, _ in events] == [data | same for data in twins]
            assert len(events) == 1
            if kind == "job.completed":
                assert events[0][1] == row.completed_at
                assert events[0][0]["duration_ms"] == to_millis(row.completed_at - row.started_at)


def test_a_refused_attempt_leaves_the_whole_turn_to_the_stepwise_path(push):
    """The statement writes nothing unless it can write all: the stepwise turn then decides row by row."""
    from django_ojs.core.types import Settlement

    running = _running(push, "refused", 2, more=1)
    batch = [Settlement(running[0].id, Lease("w1", 1), result="ok"), Settlement(running[1].id, Lease("w1", 2))]
    sql = statements(lambda: done.append(Job.objects.settle_and_fetch("w1", batch, ["refused"], 1)))
    [(verdicts, claimed)] = done
    assert sql[0].startswith("WITH claimant") and "BEGIN" in sql[1:], sql
    assert [verdict.value for verdict in verdicts] == ["completed", "refused"] and len(claimed) == 1
    assert (reload(running[0]).state, reload(running[1]).state) == ("completed", "active")
    assert Event.objects.filter(type="job.completed").count() == 1


def test_a_failure_in_the_batch_takes_the_stepwise_turn_at_once(push):
    from django_ojs.core.types import Settlement

    running = _running(push, "failing", 2)
    batch = [Settlement(running[0].id, Lease("w1", 1)),
             Settlement(running[1].id, Lease("w1", 1), failure=Failure(type="Boom", message="no"))]
    sql = statements(lambda: done.append(Job.objects.settle_and_fetch("w1", batch, ["failing"], 1)))
    assert sql[0] == "BEGIN", sql
    assert [verdict.value for verdict in done[0][0]] == ["completed", "failed"]


def test_a_workflow_step_in_the_batch_moves_its_workflow_through_the_stepwise_turn(db):
    from django_ojs.core.types import Settlement

    workflow = store.create(parse({"type": "chain", "name": "two", "steps": [
        {"type": "a", "args": [], "options": {"queue": "step-turn"}},
        {"type": "b", "args": [], "options": {"queue": "step-turn"}}]}, max_jobs=10, job_options=store.job_options()))
    Worker.objects.register("w1")
    [step] = Job.objects.fetch(["step-turn"], worker_id="w1")
    verdicts, claimed = Job.objects.settle_and_fetch("w1", [Settlement(step.id, Lease("w1", 1), result=1)],
                                                      ["step-turn"], 1)
    assert [verdict.value for verdict in verdicts] == ["completed"]
    [second] = claimed
    assert (second.type, second.extra["workflow_id"]) == ("b", str(workflow.id))
    assert Event.objects.filter(job_id=step.id, type="job.completed").count() == 1


def test_a_candidate_that_needs_deciding_is_claimed_stepwise_after_the_turn_wrote_its_batch(push):
    running = _running(push, "keyed-turn", 2)
    keyed = push(options={"queue": "keyed-turn", "priority": 9, "rate_limit": {"key": "k", "concurrency": 5}})
    sql = statements(lambda: done.append(Job.objects.settle_and_fetch("w1", _finished(running), ["keyed-turn"], 1)))
    [(verdicts, claimed)] = done
    assert sql[0].startswith("WITH claimant") and "BEGIN" not in sql[:1], sql
    assert [verdict.value for verdict in verdicts] == ["completed"] * 2
    assert [job.id for job in claimed] == [keyed.id]
    assert Event.objects.filter(type="job.completed").count() == 2


def test_a_failed_claim_after_the_written_batch_leaves_the_batch_written(push, monkeypatch, caplog):
    """The batch's statement committed: a database error in the claim after it is not the turn's
    (the worker would write the batch again, and be refused, as if the jobs were taken away)."""
    from django.db import OperationalError

    running = _running(push, "claim-fails", 2)
    push(options={"queue": "claim-fails", "rate_limit": {"key": "k", "concurrency": 5}})

    def unreachable(*args, **kwargs):
        raise OperationalError("the server closed the connection")

    from django_ojs.core import turn

    monkeypatch.setattr(turn, "fetch", unreachable)
    verdicts, claimed = Job.objects.settle_and_fetch("w1", _finished(running), ["claim-fails"], 1)
    assert [verdict.value for verdict in verdicts] == ["completed"] * 2 and claimed == []
    assert {reload(job).state for job in running} == {"completed"}
    assert "claim after a written batch failed" in caplog.text


def test_a_turn_that_claims_nothing_is_its_batch_alone(push):
    running = _running(push, "quiet-turn", 2, more=1)
    sql = statements(lambda: done.append(Job.objects.settle_and_fetch("w1", _finished(running), ["quiet-turn"], 0)))
    assert len(sql) == 1 and done[0][1] == [], sql
    assert Job.objects.filter(queue="quiet-turn", state="available").count() == 1


def test_a_worker_of_several_queues_writes_its_batch_then_claims_from_each(push):
    running = _running(push, "first-q", 2)
    waiting = push(options={"queue": "second-q"})
    verdicts, claimed = Job.objects.settle_and_fetch("w1", _finished(running), ["first-q", "second-q"], 1)
    assert [verdict.value for verdict in verdicts] == ["completed"] * 2
    assert [job.id for job in claimed] == [waiting.id]


def test_a_worker_turn_with_nothing_to_write_is_its_claim_alone(push):
    Worker.objects.register("w1")
    push(options={"queue": "turns"})
    with CaptureQueriesContext(connection) as queries:
        verdicts, claimed = Job.objects.settle_and_fetch("w1", [], ["turns"], 2)
    sql = [q["sql"] for q in queries.captured_queries]
    assert len(sql) == 1 and "FOR KEY SHARE" in sql[0] and "SKIP LOCKED" in sql[0], sql
    assert verdicts == [] and len(claimed) == 1


@pytest.mark.parametrize("batch", [True, False], ids=["with-a-batch", "claim-only"])
def test_a_worker_declared_dead_is_revived_by_its_next_turn(push, batch):
    """Frozen past the heartbeat timeout but not yet recovered: its turn revives it, writes what
    it finished (the leases still hold) and claims anew."""
    from django_ojs.core.types import Settlement, Verdict

    Worker.objects.register("w1")
    for n in range(3):
        push(args=[n], options={"queue": "turns"})
    running = Job.objects.fetch(["turns"], count=2, worker_id="w1")
    Worker.objects.filter(id="w1").update(declared_dead_at=timezone.now())
    settlements = [Settlement(job.id, Lease("w1", 1), result=1) for job in running] if batch else []
    verdicts, claimed = Job.objects.settle_and_fetch("w1", settlements, ["turns"], 1)
    assert verdicts == ([Verdict.COMPLETED] * 2 if batch else [])
    assert len(claimed) == 1 and claimed[0].worker_id == "w1"
    assert Worker.objects.get(id="w1").declared_dead_at is None
    assert Event.objects.filter(type="worker.started", extra__revived=True).count() == 1


def test_a_mixed_batch_stores_what_the_stepwise_push_stores(spec, monkeypatch):
    # Rows carry only what differs from the batch's first job: every column
    # that may differ does here, including to and from NULL, and values
    # Python calls equal but JSON does not (1, True, 1.0).
    bodies = [
        {"args": [1], "meta": {"a": 1}, "options": {"queue": "m1", "priority": 3, "tags": ["t"],
                                                    "expires_at": "2999-01-01T00:00:00Z", "timeout": 5}},
        {"args": [True], "options": {"queue": "m2", "retry": {"max_attempts": 9}, "visibility_timeout": 7}},
        {"args": [1.0], "meta": {"a": 1}, "x-ext": {"k": 1},
         "options": {"queue": "m1", "priority": 3, "rate_limit": {"key": "r", "concurrency": 1}}},
        {"args": [], "type": "other.kind", "schema": "urn:s", "options": {"queue": "m1", "priority": 0}},
    ]
    fast = Job.objects.push_many([spec(**body) for body in bodies])
    monkeypatch.setattr(fastpush, "all_plain", lambda specs: False)
    stepwise = Job.objects.push_many([spec(**body) for body in bodies])
    for job, twin in zip(fast, stepwise, strict=True):
        assert stored(job) == stored(twin)
        assert stored(reload(job)) == stored(twin)
    assert [type(reload(job).args[0]) for job in fast[:3]] == [int, bool, float]


def test_the_jobs_of_a_batch_do_not_share_their_containers():
    import django_ojs

    first, second = django_ojs.enqueue_many([{"type": "test.job", "args": [n], "tags": ["t"]} for n in range(2)])
    first.meta["changed"] = True
    first.tags.append("u")
    first.retry["max_attempts"] = 99
    assert second.meta == {} and second.tags == ["t"] and second.retry["max_attempts"] == 3
    assert first.id != second.id and first.id.version == second.id.version == 7


# --- With a signal receiver connected (the Prometheus metrics, a project's own):
# the same one statements, which return their events for the receivers.


@pytest.fixture
def received():
    """The events the receivers got, each with whether a transaction was still open then."""
    from django_ojs.observe import signals

    seen: list = []

    def on_event(sender, event, **kwargs):
        seen.append((event, connection.in_atomic_block))

    signals.ojs_event.connect(on_event)
    yield seen
    signals.ojs_event.disconnect(on_event)


def sent(received, kind: str) -> list[Event]:
    """The ``kind`` events received, all after commit, each exactly the row the store wrote."""
    assert not any(open_ for _, open_ in received), "an event was sent inside its transaction"
    got = [event for event, _ in received if event.type == kind]
    for event in got:
        row = Event.objects.get(seq=event.seq)
        assert (row.seq, row.id, row.time, row.job_id, row.queue, row.data) == (
            event.seq, event.id, event.time, event.job_id, event.queue, event.data)
    return got


def test_nobody_listening_the_statements_return_no_events(spec, push):
    Worker.objects.register("w1")
    Job.objects.push(spec(options={"queue": "quiet"}))
    pushed = statements(lambda: Job.objects.push(spec(options={"queue": "quiet"})))
    fetched = statements(lambda: Job.objects.fetch(["quiet"], worker_id="w1"))
    [job] = Job.objects.filter(queue="quiet", state="active")
    acked = statements(lambda: Job.objects.ack(job.id, lease=Lease("w1", 1)))
    assert len(pushed) == len(fetched) == len(acked) == 1
    assert not any("RETURNING seq, id, type" in sql or "ojs_e." in sql for sql in pushed + fetched + acked)


def test_a_listened_push_is_one_statement_and_sends_what_the_stepwise_push_sends(spec, received, monkeypatch):
    Job.objects.push(spec(options={"queue": "heard"}))  # the queue's row, once per process
    received.clear()
    sql = statements(lambda: Job.objects.push_many([spec(options={"queue": "heard", "priority": 4}, args=[n])
                                                    for n in range(3)]))
    assert len(sql) == 1 and sql[0].startswith("WITH inserted AS (INSERT"), sql
    fast = sent(received, "job.enqueued")
    assert len(fast) == 3 and len({event.id for event in fast}) == 3
    monkeypatch.setattr(fastpush, "all_plain", lambda specs: False)
    received.clear()
    stepwise = Job.objects.push(spec(options={"queue": "heard", "priority": 4}, args=[9]))
    [twin] = sent(received, "job.enqueued")
    assert fast[0].data == {**twin.data, "job_id": fast[0].data["job_id"]}
    assert (fast[0].type, fast[0].queue, twin.job_id) == ("job.enqueued", "heard", stepwise.id)


def test_a_listened_push_inside_a_transaction_waits_for_its_commit(spec, received):
    with transaction.atomic():
        job = Job.objects.push(spec(options={"queue": "heard"}))
        assert received == []
    assert [event.job_id for event in sent(received, "job.enqueued")] == [job.id]
    with pytest.raises(RuntimeError), transaction.atomic():
        Job.objects.push(spec(options={"queue": "heard"}))
        raise RuntimeError("roll back")
    assert len(received) == 1


def test_a_listened_fetch_and_ack_are_single_statements_that_send_their_events_once(push, received):
    Worker.objects.register("w1")
    job = push(options={"queue": "heard"})
    Job.objects.fetch(["heard"], worker_id="w1")  # the queue's settings, then cached
    job = push(options={"queue": "heard", "priority": 2})
    received.clear()
    fetched = statements(lambda: Job.objects.fetch(["heard"], worker_id="w1"))
    assert len(fetched) == 1 and "FOR UPDATE SKIP LOCKED" in fetched[0], fetched
    [started] = sent(received, "job.started")
    assert started.job_id == job.id
    assert started.data == {"job_id": str(job.id), "job_type": job.type, "queue": "heard", "state": "active",
                            "attempt": 1, "worker_id": "w1"}
    received.clear()
    acked = statements(lambda: Job.objects.ack(job.id, result=1, lease=Lease("w1", 1)))
    assert len(acked) == 1 and acked[0].startswith("WITH acked AS (UPDATE"), acked
    [done] = sent(received, "job.completed")
    row = reload(job)
    assert done.data == {"job_id": str(job.id), "job_type": job.type, "queue": "heard", "state": "completed",
                         "attempt": 1, "duration_ms": to_millis(row.completed_at - row.started_at)}
    assert len(received) == 1


def test_a_listened_worker_turn_is_still_three_statements_and_sends_after_its_commit(push, received):
    from django_ojs.core.types import Settlement

    Worker.objects.register("w1")
    for n in range(5):
        push(args=[n], options={"queue": "turns"})
    running = Job.objects.fetch(["turns"], count=3, worker_id="w1")
    received.clear()
    settlements = [Settlement(job.id, Lease("w1", 1), result=n) for n, job in enumerate(running)]
    with CaptureQueriesContext(connection) as queries:
        verdicts, claimed = Job.objects.settle_and_fetch("w1", settlements, ["turns"], 2)
    sql = [q["sql"] for q in queries.captured_queries]
    assert sql[0] == "BEGIN" and sql[-1] == "COMMIT" and len(sql) == 5, sql
    assert [verdict.value for verdict in verdicts] == ["completed"] * 3
    completed = sent(received, "job.completed")
    assert sorted(event.job_id for event in completed) == sorted(job.id for job in running)
    assert all(set(event.data) == {"job_id", "job_type", "queue", "state", "attempt", "duration_ms"}
               and event.data["state"] == "completed" for event in completed)
    assert sorted(event.job_id for event in sent(received, "job.started")) == sorted(job.id for job in claimed)
    assert len(received) == 5


def test_with_the_event_store_off_the_fast_paths_still_send_events(push, received, ojs):
    ojs(EVENTS=False)
    Worker.objects.register("w1")
    push(options={"queue": "unstored"})
    Job.objects.fetch(["unstored"], worker_id="w1")
    job = push(options={"queue": "unstored"})
    fetched = statements(lambda: Job.objects.fetch(["unstored"], worker_id="w1"))
    Job.objects.ack(job.id, lease=Lease("w1", 1))
    assert len(fetched) == 1
    assert [event.type for event, _ in received if event.job_id == job.id] == [
        "job.enqueued", "job.started", "job.completed"]
    assert all(event.seq is None and event.id is not None for event, _ in received)
    assert not Event.objects.exists()


def test_with_an_init_receiver_the_returned_jobs_and_events_are_built_through_model_init(spec, received):
    from django.db.models.signals import post_init

    Job.objects.push(spec(options={"queue": "heard"}))  # the queue's row, once per process
    initialised: list = []

    def on_init(sender, instance, **kwargs):
        initialised.append(instance)

    post_init.connect(on_init, sender=Job)
    post_init.connect(on_init, sender=Event)
    try:
        sql = statements(lambda: initialised.extend(Job.objects.push_many(
            [spec(options={"queue": "heard"}, args=[n]) for n in range(2)])))
    finally:
        post_init.disconnect(on_init, sender=Job)
        post_init.disconnect(on_init, sender=Event)
    assert len(sql) == 1  # still the one statement
    # Each returned job and each sent event went through __init__ (the receiver saw it), then was returned.
    pushed = initialised[-2:]
    assert all(isinstance(job, Job) and not job._state.adding for job in pushed)
    assert sum(item is job for item in initialised[:-2] for job in pushed) == 2
    assert sum(isinstance(item, Event) for item in initialised) == 2
    assert [stored(job) for job in pushed] == [stored(reload(job)) for job in pushed]


def test_a_fetch_over_many_empty_queues_costs_a_constant_number_of_statements(push, is_postgres):
    """A worker naming a thousand queues used to pay a locked probe per queue (4.6 s).

    The first queue is probed directly; when it does not fill the claim,
    one statement finds the queues with work, in the order given, paused
    queues left out.
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    push(args=["late"], options={"queue": "q-0998"})
    push(args=["paused"], options={"queue": "q-0500"})
    Queue.objects.pause("q-0500")
    names = [f"q-{n:04d}" for n in range(1000)]
    with CaptureQueriesContext(connection) as queries:
        assert fetched_args(names, count=2) == [["late"]]
    if is_postgres:
        assert len(queries) < 15, [query["sql"][:120] for query in queries]
