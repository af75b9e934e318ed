"""Workers through the core: register, BEAT, directives (ojs-worker-protocol §3, §4)."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid

import pytest
from django.db import connection, connections, transaction

from django_ojs.core.workers import WorkerInfo
from django_ojs.models import Job, Worker
from django_ojs.states import WorkerState
from tests.helpers import ago, event_types, reload, update


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
    reply = Worker.objects.beat("w1", state=WorkerState.QUIET, active_job_ids=[str(job.id)])
    worker = Worker.objects.get(id="w1")
    assert worker.last_heartbeat_at == reply.server_time
    assert (worker.state, worker.active_jobs, worker.active_job_ids) == ("quiet", 1, [str(job.id)])


def test_a_heartbeat_extends_the_leases_of_the_workers_own_active_jobs(claim):
    first = update(claim("w1", options={"visibility_timeout_ms": 60_000}), lease_expires_at=ago(seconds=1))
    second = update(claim("w1", options={"visibility_timeout_ms": 5_000}), lease_expires_at=ago(seconds=1))
    reply = Worker.objects.beat("w1", active_job_ids=[str(first.id), str(second.id)])
    assert sorted(reply.jobs_extended) == sorted([str(first.id), str(second.id)])
    # Each by its own visibility timeout, from the database's now.
    assert reload(first).lease_expires_at == reply.server_time + dt.timedelta(seconds=60)
    assert reload(second).lease_expires_at == reply.server_time + dt.timedelta(seconds=5)
    assert (reply.jobs_cancelled, reply.jobs_lost) == ([], [])


def test_a_heartbeat_may_ask_for_a_visibility_timeout(claim):
    job = claim("w1")
    reply = Worker.objects.beat("w1", active_job_ids=[str(job.id)], visibility_timeout=dt.timedelta(seconds=7))
    assert reload(job).lease_expires_at == reply.server_time + dt.timedelta(seconds=7)


def test_a_heartbeat_does_not_extend_another_workers_job(claim):
    job = update(claim("owner"), lease_expires_at=ago(seconds=1))
    lease = reload(job).lease_expires_at
    reply = Worker.objects.beat("intruder", active_job_ids=[str(job.id)])
    assert (reply.jobs_extended, reply.jobs_lost) == ([], [str(job.id)])
    assert (reload(job).lease_expires_at, reload(job).worker_id) == (lease, "owner")


def test_a_heartbeat_adopts_a_job_claimed_without_a_worker_id(claim):
    job = claim(None)
    reply = Worker.objects.beat("w1", active_job_ids=[str(job.id)])
    assert reply.jobs_extended == [str(job.id)]
    assert reload(job).worker_id == "w1"


def test_a_heartbeat_reports_cancelled_and_lost_jobs(claim):
    cancelled = claim("w1")
    Job.objects.cancel(cancelled.id)
    finished = claim("w1")
    Job.objects.ack(finished.id)
    reaped = update(claim("w1"), lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    unknown = str(uuid.uuid4())
    reply = Worker.objects.beat("w1", active_job_ids=[str(cancelled.id), str(finished.id), str(reaped.id), unknown])
    assert reply.jobs_extended == []
    assert reply.jobs_cancelled == [str(cancelled.id)]
    assert sorted(reply.jobs_lost) == sorted([str(finished.id), str(reaped.id), unknown])
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
    assert Worker.objects.beat("w1", active_job_ids=[str(job.id)]).directive == WorkerState.RUNNING
    ojs(TEST_HOOKS=True)
    assert Worker.objects.beat("w1", active_job_ids=[str(job.id)]).directive == WorkerState.TERMINATE


@pytest.mark.parametrize("hint", [["quiet"], {"state": "quiet"}, 3, "dance"])
def test_a_malformed_test_directive_is_ignored(claim, ojs, hint):
    job = claim("w1", meta={"test_directive": hint})
    ojs(TEST_HOOKS=True)
    assert Worker.objects.beat("w1", active_job_ids=[str(job.id)]).directive == WorkerState.RUNNING


def _blocked_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.postgres
def test_a_heartbeat_racing_a_reclaim_does_not_steal_the_job(transactional_db, spec):
    """BEAT decides which jobs it holds, then extends them: the write must re-check the owner.

    A second connection holds the job row while the heartbeat reads it as
    its own; the job is then reaped and claimed by another worker. The
    heartbeat's UPDATE, released, must not write the old owner back.
    """
    job = Job.objects.push(spec(options={"queue": "race"}))
    Job.objects.fetch(["race"], worker_id="old-owner")
    Worker.objects.register("old-owner")
    locked, reclaim = threading.Event(), threading.Event()
    failures: list[BaseException] = []
    replies = []

    def reclaimer() -> None:
        try:
            with transaction.atomic():
                Job.objects.select_for_update().get(pk=job.pk)
                locked.set()
                assert reclaim.wait(60)
                # What requeue_lapsed and a new claim write, in one step.
                Job.objects.filter(pk=job.pk).update(worker_id="new-owner", attempt=2)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    def heartbeat() -> None:
        try:
            replies.append(Worker.objects.beat("old-owner", active_job_ids=[str(job.id)]))
        except BaseException as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    holder = threading.Thread(target=reclaimer)
    holder.start()
    assert locked.wait(60)
    beater = threading.Thread(target=heartbeat)
    beater.start()
    deadline = time.monotonic() + 60
    while not _blocked_on_a_lock():
        assert time.monotonic() < deadline, "the heartbeat never reached the job row"
        time.sleep(0.02)
    reclaim.set()
    holder.join(60)
    beater.join(60)
    assert not failures
    stored = reload(job)
    assert (stored.worker_id, stored.attempt) == ("new-owner", 2)
    assert str(job.id) not in replies[0].jobs_extended
    assert replies[0].jobs_lost == [str(job.id)]
