"""Workers through the core: register, BEAT, directives (ojs-worker-protocol §3, §4)."""

from __future__ import annotations

import datetime as dt
import threading
import uuid

import pytest
from django.db import connections, transaction

from django_ojs.core.types import HeldJob, WorkerInfo
from django_ojs.models import Job, Worker
from django_ojs.protocol.states import WorkerState
from tests.helpers import ago, event_types, holding, reload, update


def test_register_records_what_the_worker_says_about_itself(db):
    worker = Worker.objects.register(
        "w1", WorkerInfo(hostname="host-1", pid=42, queues=["email"], concurrency=5, labels=["canary"]))
    stored = Worker.objects.get(id="w1")
    assert (stored.hostname, stored.pid, stored.queues, stored.concurrency, stored.labels) == (
        "host-1", 42, ["email"], 5, ["canary"])
    assert (stored.state, stored.directive) == ("running", "running")
    assert stored.registered_at == stored.last_heartbeat_at == worker.last_heartbeat_at
    assert event_types() == ["worker.started"]


def test_registering_again_updates_the_row(db):
    Worker.objects.register("w1", WorkerInfo(hostname="old", concurrency=1))
    Worker.objects.register("w1", WorkerInfo(concurrency=9))
    stored = Worker.objects.get(id="w1")
    assert (stored.hostname, stored.concurrency) == ("old", 9)
    assert event_types() == ["worker.started"]


def test_a_heartbeat_from_an_unknown_worker_registers_it(db):
    reply = Worker.objects.beat("w-new", state=WorkerState.RUNNING, info=WorkerInfo(hostname="h"))
    worker = Worker.objects.get(id="w-new")
    assert (worker.hostname, worker.state, worker.last_heartbeat_at) == ("h", "running", reply.server_time)
    assert reply.directive == WorkerState.RUNNING
    assert event_types() == ["worker.started"]


def test_a_heartbeat_refreshes_the_worker_and_records_its_jobs(claim):
    Worker.objects.register("w1")
    Worker.objects.filter(id="w1").update(last_heartbeat_at=ago(seconds=20))
    job = claim("w1")
    reply = Worker.objects.beat("w1", state=WorkerState.QUIET, held=holding(job))
    worker = Worker.objects.get(id="w1")
    assert worker.last_heartbeat_at == reply.server_time
    assert (worker.state, worker.active_jobs, worker.active_job_ids) == ("quiet", 1, [str(job.id)])


def test_a_heartbeat_extends_the_leases_of_the_workers_own_active_jobs(claim):
    first = update(claim("w1", options={"visibility_timeout_ms": 60_000}), lease_expires_at=ago(seconds=1))
    second = update(claim("w1", options={"visibility_timeout_ms": 5_000}), lease_expires_at=ago(seconds=1))
    reply = Worker.objects.beat("w1", held=holding(first, second))
    assert reply.jobs_extended == holding(first, second)
    # Each by its own visibility timeout, from the database's now.
    assert reload(first).lease_expires_at == reply.server_time + dt.timedelta(seconds=60)
    assert reload(second).lease_expires_at == reply.server_time + dt.timedelta(seconds=5)
    assert (reply.jobs_cancelled, reply.jobs_lost) == ([], [])


def test_a_heartbeat_may_ask_for_a_visibility_timeout(claim):
    job = claim("w1")
    reply = Worker.objects.beat("w1", held=holding(job), visibility_timeout=dt.timedelta(seconds=7))
    assert reload(job).lease_expires_at == reply.server_time + dt.timedelta(seconds=7)


def test_a_heartbeat_does_not_extend_another_workers_job(claim):
    job = update(claim("owner"), lease_expires_at=ago(seconds=1))
    lease = reload(job).lease_expires_at
    reply = Worker.objects.beat("intruder", held=holding(job))
    assert (reply.jobs_extended, reply.jobs_lost) == ([], holding(job))
    assert (reload(job).lease_expires_at, reload(job).worker_id) == (lease, "owner")


def test_a_heartbeat_adopts_a_job_claimed_without_a_worker_id(claim):
    job = claim(None)
    reply = Worker.objects.beat("w1", held=[HeldJob(str(job.id))])
    assert reply.jobs_extended == [HeldJob(str(job.id))]
    assert reload(job).worker_id == "w1"


def test_a_heartbeat_reports_cancelled_and_lost_jobs(claim):
    cancelled = claim("w1")
    Job.objects.cancel(cancelled.id)
    finished = claim("w1")
    Job.objects.ack(finished.id)
    reaped = update(claim("w1"), lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    unknown = HeldJob(str(uuid.uuid4()), 1)
    reply = Worker.objects.beat("w1", held=[*holding(cancelled, finished, reaped), unknown])
    assert reply.jobs_extended == []
    assert reply.jobs_cancelled == holding(cancelled)
    assert reply.jobs_lost == [*holding(finished, reaped), unknown]
    assert reload(reaped).lease_expires_at is None


@pytest.mark.parametrize("directive", [WorkerState.QUIET, WorkerState.TERMINATE, WorkerState.RUNNING])
def test_the_heartbeat_answers_the_directive_an_operator_set(db, directive):
    Worker.objects.register("w1")
    Worker.objects.register("w2")
    assert Worker.objects.set_directive(["w1"], directive) == 1
    assert Worker.objects.beat("w1").directive == directive
    assert Worker.objects.beat("w2").directive == WorkerState.RUNNING
    assert Worker.objects.get(id="w1").directive_set_at is not None


def test_meta_test_directive_steers_the_reply_only_with_test_hooks(claim, ojs):
    job = claim("w1", meta={"test_directive": "terminate"})
    assert Worker.objects.beat("w1", held=holding(job)).directive == WorkerState.RUNNING
    ojs(TEST_HOOKS=True)
    assert Worker.objects.beat("w1", held=holding(job)).directive == WorkerState.TERMINATE


@pytest.mark.parametrize("hint", [["quiet"], {"state": "quiet"}, 3, "dance"])
def test_a_malformed_test_directive_is_ignored(claim, ojs, hint):
    job = claim("w1", meta={"test_directive": hint})
    ojs(TEST_HOOKS=True)
    assert Worker.objects.beat("w1", held=holding(job)).directive == WorkerState.RUNNING


@pytest.mark.postgres
def test_a_heartbeat_never_waits_on_a_job_row_another_transaction_holds(transactional_db, spec):
    """DESIGN invariant 11: a heartbeat that waited on a job row could deadlock.

    The worker's own batch of ACKs and FAILs holds job rows while its
    heartbeat runs; a heartbeat killed as a deadlock victim gets a live
    worker declared dead. Here a second connection holds the job row while
    the heartbeat runs: the heartbeat returns at once, neither extending the
    job nor calling it lost; once the holder has reclaimed the job for
    another worker, the next heartbeat reports it lost and the first wrote
    nothing.
    """
    job = Job.objects.push(spec(options={"queue": "race"}))
    [job] = Job.objects.fetch(["race"], worker_id="old-owner")
    Worker.objects.register("old-owner")
    locked, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def holder() -> None:
        try:
            with transaction.atomic():
                Job.objects.select_for_update().get(pk=job.pk)
                locked.set()
                assert release.wait(60)
                # What requeue_lapsed and a new claim write, in one step.
                Job.objects.filter(pk=job.pk).update(worker_id="new-owner", attempt=2)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert locked.wait(60)
        lease = reload(job).lease_expires_at
        reply = Worker.objects.beat("old-owner", held=holding(job))
        assert (reply.jobs_extended, reply.jobs_cancelled, reply.jobs_lost) == ([], [], [])
        assert reload(job).lease_expires_at == lease
    finally:
        release.set()
        thread.join(60)
    assert not failures
    stored = reload(job)
    assert (stored.worker_id, stored.attempt) == ("new-owner", 2)
    assert Worker.objects.beat("old-owner", held=holding(job)).jobs_lost == holding(job)


def test_a_heartbeat_names_attempts_and_leaves_a_later_attempt_alone(claim):
    """DESIGN invariant 12: a stale heartbeat about attempt 1 must not touch attempt 2.

    The worker failed attempt 1, claimed the job again as attempt 2, and a
    heartbeat that listed attempt 1 is answered now: attempt 1 is lost,
    attempt 2 is extended and stays active.
    """
    from django_ojs.core.types import Lease
    from django_ojs.protocol.failure import Failure

    first = claim("w1")
    Job.objects.fail(first.id, Failure(type="Boom", message="x"), lease=Lease("w1", 1), requeue=True)
    [second] = Job.objects.fetch([first.queue], worker_id="w1")
    assert second.attempt == 2
    reply = Worker.objects.beat("w1", held=holding(first, second))
    assert reply.jobs_lost == holding(first)
    assert reply.jobs_extended == holding(second)
    assert reload(second).state == "active"


def test_a_heartbeat_from_a_worker_declared_dead_revives_it(claim):
    Worker.objects.register("w1")
    job = claim("w1")
    Worker.objects.filter(id="w1").update(last_heartbeat_at=ago(seconds=3600))
    Worker.objects.reap_dead(10)
    assert Worker.objects.get(id="w1").declared_dead_at is not None
    reply = Worker.objects.beat("w1", held=holding(job))
    assert reply.revived
    assert reply.jobs_lost == holding(job)
    worker = Worker.objects.get(id="w1")
    assert (worker.declared_dead_at, worker.last_heartbeat_at) == (None, reply.server_time)
    assert not Worker.objects.beat("w1").revived
