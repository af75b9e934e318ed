"""What becomes of an attempt: results, exceptions, missing handlers, timeouts."""

from __future__ import annotations

import pytest

import django_ojs
from django_ojs.models import Job, JobError

from .conftest import PATIENCE, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def settled(job, state: str, timeout: float = PATIENCE) -> Job:
    wait_until(lambda: Job.objects.filter(id=job.id, state=state).exists(), timeout, f"job to be {state}")
    return Job.objects.get(id=job.id)


def test_results_exceptions_and_unknown_types(worker):
    worker()
    # Enqueued first: the worker's claims pass it over (no handler), so it is never run, never lost.
    orphan = django_ojs.enqueue("nobody.handles.this", [1])
    done = django_ojs.enqueue("probe.record", [0])
    boom = django_ojs.enqueue("probe.explode", ["disk full"], retry={"max_attempts": 1})

    assert settled(done, "completed").result["attempt"] == 1

    failed = settled(boom, "discarded")
    error = JobError.objects.get(job=failed)
    assert (error.type, error.message) == ("ProbeError", "disk full")
    # Innermost frame first: the handler that raised, then the code that called it.
    assert error.backtrace[0].startswith("at explode (") and "probe/jobs.py" in error.backtrace[0]
    assert len(error.backtrace) <= 50 and sum(map(len, error.backtrace)) <= 10_000

    orphan.refresh_from_db()
    assert (orphan.state, orphan.attempt, orphan.worker_id) == ("available", 0, None)
    assert not JobError.objects.filter(job=orphan).exists()


def test_backtraces_can_be_omitted(worker):
    worker(env={"OJS_OMIT_BACKTRACES": "1"})
    boom = django_ojs.enqueue("probe.explode", ["secret path"], retry={"max_attempts": 1})
    error = JobError.objects.get(job=settled(boom, "discarded"))
    assert error.type == "ProbeError" and error.backtrace == []


@pytest.mark.parametrize("mode", [(), ("--async",)], ids=["threaded", "event-loop"])
def test_a_timed_out_job_fails_and_its_thread_keeps_the_slot_until_it_returns(worker, mode):
    worker("--concurrency", "1", *mode)
    # Overruns its 1 s timeout by far, so the worker sees it overrun even on a loaded machine.
    slow = django_ojs.enqueue("probe.record", [6.0], timeout=1, retry={"max_attempts": 1})
    quick = django_ojs.enqueue("probe.record", [0])

    error = JobError.objects.get(job=settled(slow, "discarded"))
    assert error.type == "timeout"
    settled(quick, "completed")
    slow_run = Execution.objects.get(job_id=slow.id)
    quick_run = Execution.objects.get(job_id=quick.id)
    # With one slot, the next job starts only once the overrunning handler has returned.
    assert slow_run.finished_at is not None
    assert quick_run.started_at >= slow_run.finished_at
