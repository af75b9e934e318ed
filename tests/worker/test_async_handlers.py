"""async def handlers under a real ojs_worker: threaded mode and the event-loop mode (--async)."""

from __future__ import annotations

import json
import signal
import time

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, transaction

import django_ojs
from django_ojs.models import Job, JobError, Worker

from .conftest import PATIENCE, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def completed(count: int) -> bool:
    return Job.objects.filter(state="completed").count() == count


def most_at_once(runs: list[Execution]) -> int:
    """The largest number of runs whose [started, finished] intervals overlap."""
    moments = sorted([(run.started_at, 1) for run in runs] + [(run.finished_at, -1) for run in runs],
                     key=lambda item: (item[0], item[1]))
    running = peak = 0
    for _, step in moments:
        running += step
        peak = max(peak, running)
    return peak


def test_the_threaded_worker_runs_an_async_handler(worker):
    worker()
    job = django_ojs.enqueue("probe.async_record", [0.1])
    wait_until(lambda: completed(1), PATIENCE, "the async job to complete")
    job.refresh_from_db()
    assert job.result == {"attempt": 1, "async": True}  # not an "invalid result" failure
    assert not JobError.objects.exists()


def test_the_threaded_worker_runs_async_handlers_database_work_in_their_own_threads(worker):
    """Each handler thread runs its async handler's ORM calls itself (async_to_sync), so four
    threads query four at a time -- not one at a time in asgiref's one shared thread."""
    worker("--concurrency", "4")
    django_ojs.enqueue_many([{"type": "probe.async_query", "args": [2.0]} for _ in range(4)])
    wait_until(lambda: completed(4), PATIENCE, "4 async jobs to complete")
    peak = most_at_once(list(Execution.objects.all()))
    assert peak >= 3, peak


def test_the_async_worker_runs_many_io_bound_handlers_on_one_loop(worker):
    process = worker("--async", "--concurrency", "50")
    assert "on one event loop (async)" in process.output
    started = time.monotonic()
    django_ojs.enqueue_many([{"type": "probe.async_record", "args": [1.0]} for _ in range(50)])
    wait_until(lambda: completed(50), PATIENCE, "50 async jobs to complete")
    took = time.monotonic() - started
    runs = list(Execution.objects.all())
    peak = most_at_once(runs)
    # 50 one-second awaits at once on one loop: far more than the executor
    # threads a plain worker would have had for them.
    assert peak >= 25, peak
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0
    assert "at most 50 of 50 slots" in process.output or "of 50 slots in use" in process.output
    print(f"\nasync worker: 50 jobs awaiting 1 s each done in {took:.2f} s, at most {peak} at once")


def test_the_async_worker_runs_as_many_plain_handlers_at_once_as_it_has_slots(worker):
    """Plain handlers run in threads beside the loop: --concurrency 20 runs 20 at once,
    not as many as asyncio's default executor has threads (the cores + 4)."""
    worker("--async", "--concurrency", "20")
    django_ojs.enqueue_many([{"type": "probe.record", "args": [3.0]} for _ in range(20)])
    wait_until(lambda: completed(20), PATIENCE, "20 plain jobs to complete")
    peak = most_at_once(list(Execution.objects.all()))
    assert peak >= 15, peak


def test_the_async_worker_runs_execution_middleware_around_both_kinds_of_handler(worker):
    """With middleware the chain runs in a handler thread and an async handler's coroutine on the
    loop, the thread waiting for it; a plain handler runs in the chain's thread."""
    worker("--async", "--concurrency", "4",
           env={"OJS_EXECUTION_MIDDLEWARE": json.dumps(["tests.worker.probe.middleware.wrap_result"])})
    plain = run_one("probe.backend")
    coroutine = run_one("probe.async_backend")
    for job in (plain, coroutine):
        assert job.state == "completed", JobError.objects.filter(job=job).values_list("message", flat=True)
        assert job.result["chain_thread"].startswith("ojs-handler-")
        assert isinstance(job.result["inner"]["backend"], int)


def test_sigterm_ends_an_async_worker_whose_plain_handler_never_returns(worker):
    """A thread cannot be stopped: past the grace period the worker releases the job and exits
    without waiting for the thread, in --async mode as in the threaded one."""
    process = worker("--async", "--grace-period", "1")
    stuck = django_ojs.enqueue("probe.record", [3600])
    wait_until(lambda: Execution.objects.filter(job_id=stuck.id).exists(), PATIENCE, "the endless job to start")
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0, process.output
    stuck.refresh_from_db()
    assert stuck.state == "available"  # released, without spending the attempt


def test_async_mode_cancels_the_task_on_timeout_and_on_cancel_and_frees_its_slot(worker):
    worker("--async", "--concurrency", "1")
    timed_out = django_ojs.enqueue("probe.async_forever", [], timeout=1, retry={"max_attempts": 1})
    wait_until(lambda: Job.objects.filter(id=timed_out.id, state="discarded").exists(), PATIENCE, "the timeout")
    wait_until(lambda: Execution.objects.filter(job_id=timed_out.id, finished_at__isnull=False).exists(),
               PATIENCE, "the timed-out task to be cancelled")
    assert JobError.objects.get(job=timed_out).type == "timeout"

    # The one slot is free again: the next job runs; cancel it through the core,
    # the worker learns it from a heartbeat reply and cancels the task.
    cancelled = django_ojs.enqueue("probe.async_forever", [])
    wait_until(lambda: Execution.objects.filter(job_id=cancelled.id).exists(), PATIENCE, "the next job to start")
    Job.objects.cancel(cancelled.id)
    wait_until(lambda: Execution.objects.filter(job_id=cancelled.id, finished_at__isnull=False).exists(),
               PATIENCE, "the cancelled task to unwind")
    after = django_ojs.enqueue("probe.async_record", [0])
    wait_until(lambda: Job.objects.filter(id=after.id, state="completed").exists(), PATIENCE, "a job after them")


def test_sigterm_drains_async_jobs_then_interrupts_those_past_the_grace_period(worker):
    process = worker("--async", "--concurrency", "10", "--grace-period", "120")
    finishing = [django_ojs.enqueue("probe.async_record", [2.0]) for _ in range(5)]
    wait_until(lambda: Execution.objects.count() == 5, PATIENCE, "5 running async jobs")
    process.send(signal.SIGTERM)
    assert process.wait(timeout=300) == 0, process.output
    for job in finishing:
        job.refresh_from_db()
        assert (job.state, job.attempt) == ("completed", 1)
    assert not Worker.objects.exists()

    Execution.objects.all().delete()
    process = worker("--async", "--grace-period", "1")
    stuck = django_ojs.enqueue("probe.async_forever", [])
    wait_until(lambda: Execution.objects.filter(job_id=stuck.id).exists(), PATIENCE, "the endless job to start")
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0, process.output
    stuck.refresh_from_db()
    assert stuck.state == "available"  # released, without spending the attempt
    assert JobError.objects.get(job=stuck).type == "ShutdownError"
    assert Execution.objects.get(job_id=stuck.id).finished_at is not None  # its task was cancelled


@pytest.mark.django_db(transaction=True)
def test_aenqueue_from_async_code_is_transactional_with_the_callers_rows():
    from .probe.models import Order

    async def view(reference: str) -> str:
        job = await django_ojs.aenqueue("probe.record", [reference], priority=3)
        return str(job.id)

    job_id = async_to_sync(view)("A-7")
    assert Job.objects.get(id=job_id).priority == 3

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        Order.objects.create(reference="A-8")
        async_to_sync(django_ojs.aenqueue)("probe.record", ["A-8"])  # same thread, same transaction
        raise Boom
    assert not Job.objects.filter(args=["A-8"]).exists()


def test_the_async_worker_writes_the_progress_report_a_failed_handler_held_back(worker):
    """ctx.progress() writes at most once a second; the runner writes the last report when the
    handler ends, and a failed attempt keeps it (ojs-progress §8) -- in --async mode too."""
    process = worker("--async")
    job = django_ojs.enqueue("probe.async_progress_then_fail")
    wait_until(lambda: Job.objects.filter(pk=job.pk, state="discarded").exists(), PATIENCE,
               "the job to fail for good")
    job.refresh_from_db()
    assert (job.progress["attempt"], job.progress["progress"], job.progress["data"]) == (1, 0.5, {"step": "last"})
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0


def run_one(job_type: str) -> Job:
    """Enqueue a job of ``job_type`` (one attempt) and wait for it to end."""
    job = django_ojs.enqueue(job_type, retry={"max_attempts": 1})
    wait_until(lambda: Job.objects.filter(pk=job.pk, state__in=["completed", "discarded"]).exists(), PATIENCE,
               f"{job_type} to end")
    job.refresh_from_db()
    return job


def terminate(backend: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [backend])

    def gone() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [backend])
            return cursor.fetchone()[0] == 0

    wait_until(gone, PATIENCE, f"session {backend} to end")


# An async handler's ORM calls run in its handler thread in the threaded worker
# (async_to_sync), in asgiref's shared thread with --async; a sync handler's in its
# handler thread (one: --concurrency 1), as the control.
HANDLERS = [((), "probe.async_backend"), (("--async",), "probe.async_backend"), ((), "probe.backend")]
HANDLER_IDS = ["async-handler-threaded", "async-handler-event-loop", "sync-handler-threaded"]


@pytest.mark.parametrize("mode, job_type", HANDLERS, ids=HANDLER_IDS)
def test_a_kept_connection_the_database_dropped_is_replaced_before_the_next_job(worker, mode, job_type):
    """Persistent connections with CONN_HEALTH_CHECKS: the worker checks the connection its
    handler's ORM calls use before each job, so the job after a dropped session runs."""
    worker(*mode, "--concurrency", "1", env={"OJS_CONN_HEALTH_CHECKS": "1"})
    first = run_one(job_type)
    assert first.state == "completed", JobError.objects.filter(job=first).values_list("message", flat=True)
    terminate(first.result["backend"])
    second = run_one(job_type)
    assert second.state == "completed", JobError.objects.filter(job=second).values_list("message", flat=True)
    assert second.result["backend"] != first.result["backend"]


@pytest.mark.parametrize("mode, job_type", HANDLERS, ids=HANDLER_IDS)
def test_without_health_checks_a_dropped_connection_fails_one_job_not_every_later_one(worker, mode, job_type):
    """As a Django request does: the job that meets the dropped session fails, the check after it
    closes the broken connection, and the next job connects again."""
    worker(*mode, "--concurrency", "1")
    first = run_one(job_type)
    assert first.state == "completed"
    terminate(first.result["backend"])
    met_it = run_one(job_type)
    if met_it.state == "discarded":
        assert "terminat" in JobError.objects.get(job=met_it).message.lower() or \
            "connection" in JobError.objects.get(job=met_it).message.lower()
    after = run_one(job_type)
    assert after.state == "completed", JobError.objects.filter(job=after).values_list("message", flat=True)
