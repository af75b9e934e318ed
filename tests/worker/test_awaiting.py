"""Awaiting a result from real worker processes, and a batch its own job grows.

``job.wait()`` and ``await job.await_result()`` return the result a worker
wrote, raise with the last error when the job ends without one, and give up
after their timeout while the job goes on. On PostgreSQL the waiter is woken
by NOTIFY: with the fallback poll set to an hour, only the notification can
end the wait. Without LISTEN it polls.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections

import django_ojs
from django_ojs.errors import JobCancelled, JobFailed, WaitTimedOut
from django_ojs.models import Job, Workflow, WorkflowNode

from .conftest import PATIENCE, wait_until
from .probe.jobs import collect, explode, gather, grow, record
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# Far longer than PATIENCE: a wait that ends was woken by a notification, not by its poll.
ONLY_NOTIFY = {"LISTEN_POLL_INTERVAL": 3600, "POLL_INTERVAL": 3600}


def test_wait_returns_the_result_a_real_worker_wrote_woken_by_notify(worker, ojs):
    ojs(**ONLY_NOTIFY)
    worker()
    job = record.enqueue(0.3)
    started = time.monotonic()
    assert job.wait(timeout=PATIENCE) == {"attempt": 1, "pid": Execution.objects.get(job_id=job.id).pid}
    assert time.monotonic() - started < PATIENCE
    assert (job.state, job.result["attempt"]) == ("completed", 1)  # the instance was refreshed
    # Fetched again later, the same job answers at once.
    assert Job.objects.get(id=job.id).wait(timeout=0) == job.result


def test_await_result_returns_the_result_without_blocking_the_loop(worker, ojs):
    ojs(**ONLY_NOTIFY)
    worker()
    job = record.enqueue(0.3)

    async def main() -> tuple[object, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        try:
            return await job.await_result(timeout=PATIENCE), ticks
        finally:
            ticker.cancel()
            # The reads ran in asgiref's sync thread, on a connection of its own: closed as a request's would be.
            await sync_to_async(connections.close_all)()

    result, ticks = asyncio.run(main())
    assert result["attempt"] == 1
    assert ticks > 1  # the loop ran on while the job did


def test_a_discarded_job_raises_job_failed_with_its_last_error(worker, ojs):
    ojs(**ONLY_NOTIFY)
    worker()
    job = explode.using(retry={"max_attempts": 1}).enqueue("out of paper")
    with pytest.raises(JobFailed) as raised:
        job.wait(timeout=PATIENCE)
    assert (raised.value.state, raised.value.job_id) == ("discarded", str(job.id))
    assert raised.value.error["message"] == "out of paper"
    assert "out of paper" in str(raised.value)


def test_a_cancelled_job_raises_job_cancelled(ojs, transactional_db):
    ojs(**ONLY_NOTIFY)
    job = django_ojs.enqueue("probe.record", [0], queue="nobody-reads")

    def cancel() -> None:
        Job.objects.cancel(job.id)
        connection.close()  # this thread's

    threading.Timer(0.2, cancel).start()
    with pytest.raises(JobCancelled) as raised:
        job.wait(timeout=PATIENCE)
    assert raised.value.state == "cancelled"


def test_a_wait_that_times_out_leaves_the_job_running(worker):
    worker()
    job = record.enqueue(3600)
    wait_until(lambda: Job.objects.get(id=job.id).state == "active", PATIENCE, "the job to start")
    with pytest.raises(WaitTimedOut) as raised:
        job.wait(timeout=0.2)
    assert (raised.value.state, Job.objects.get(id=job.id).state) == ("active", "active")


def test_without_listen_the_wait_polls(worker, ojs):
    ojs(LISTEN=False, POLL_INTERVAL=0.05)
    worker(env={"OJS_LISTEN": "off"})
    job = record.enqueue(0.1)
    assert job.wait(timeout=PATIENCE)["attempt"] == 1


def test_a_job_grows_its_batch_and_the_callback_sees_every_job_once(worker):
    worker("--concurrency", "4")
    workflow = django_ojs.batch(grow.s(["x", "y"]), collect.s("a"), on_complete=gather.s()).enqueue()
    wait_until(lambda: Workflow.objects.get(id=workflow.id).state == "completed", PATIENCE, "the batch to end")
    paths = sorted(WorkflowNode.objects.filter(workflow=workflow, kind="job").values_list("path", "state"))
    assert paths == [("0", "completed"), ("1", "completed"), ("2", "completed"), ("3", "completed"),
                     ("on_complete", "completed")]
    callback = WorkflowNode.objects.get(workflow=workflow, path="on_complete")
    assert [entry.get("value") if isinstance(entry, dict) else None for entry in callback.result["seen"]][1:] == [
        "a", "x", "y"]
    assert Execution.objects.filter(job_id=callback.job_id).count() == 1  # fired once
