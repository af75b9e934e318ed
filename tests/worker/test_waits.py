"""Snooze and signals with a real worker process and reaper: the job leaves the worker's slot while it
waits, and comes back to complete once, with no attempt spent by snoozes."""

from __future__ import annotations

import pytest

import django_ojs
from django_ojs.models import Job, JobError

from .conftest import PATIENCE, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def settled(job, state: str) -> Job:
    wait_until(lambda: Job.objects.filter(id=job.id, state=state).exists(), PATIENCE, f"job to be {state}")
    return Job.objects.get(id=job.id)


def test_snoozing_jobs_complete_after_their_snoozes_without_spending_attempts(worker, reaper):
    worker("--concurrency", "2")
    reaper()
    raised = django_ojs.enqueue("probe.snooze", [3], retry={"max_attempts": 1})
    returned = django_ojs.enqueue("probe.snooze", [2, 0.2, True], retry={"max_attempts": 1})
    for job, times in ((raised, 3), (returned, 2)):
        done = settled(job, "completed")
        # max_attempts 1, and yet it ran times + 1: snoozes are not attempts.
        assert done.result == {"snoozes": times, "attempt": times + 1}
        assert (done.snoozes, done.releases) == (times, times)
        assert Execution.objects.filter(job_id=job.id).count() == times + 1
        assert not JobError.objects.filter(job=done).exists()


def test_a_waiting_job_frees_its_slot_and_its_signal_brings_it_back(worker, reaper):
    worker("--concurrency", "1")
    reaper()
    waiting = django_ojs.enqueue("probe.await_signal", ["approved", 3600])
    wait_until(lambda: Job.objects.filter(id=waiting.id, state="scheduled", waiting_for="approved").exists(),
               PATIENCE, "the job to park")
    # The only slot is free: another job runs while the first one waits.
    other = django_ojs.enqueue("probe.record", [0])
    settled(other, "completed")
    django_ojs.signal(waiting.id, "approved", {"by": "ann"})
    done = settled(waiting, "completed")
    assert done.result == {"payload": {"by": "ann"}}
    assert Execution.objects.filter(job_id=waiting.id).count() == 2


def test_a_wait_that_times_out_returns_its_default_or_fails(worker, reaper):
    worker("--concurrency", "2")
    reaper()
    defaulted = django_ojs.enqueue("probe.await_signal", ["approved", 0.5, "nobody answered"])
    raising = django_ojs.enqueue("probe.await_signal", ["approved", 0.5], retry={"max_attempts": 1})
    assert settled(defaulted, "completed").result == {"payload": "nobody answered"}
    failed = settled(raising, "discarded")
    assert JobError.objects.get(job=failed).type == "SignalTimeout"


@pytest.mark.parametrize("mode", [(), ("--async",)], ids=["threaded", "event-loop"])
def test_an_async_handler_snoozes_and_waits_in_both_runners(worker, reaper, mode):
    worker(*mode)
    reaper()
    job = django_ojs.enqueue("probe.async_snooze_then_wait", ["approved"], retry={"max_attempts": 1})
    wait_until(lambda: Job.objects.filter(id=job.id, state="scheduled", waiting_for="approved").exists(),
               PATIENCE, "the job to park on its wait")
    django_ojs.signal(job.id, "approved", [1, 2])
    done = settled(job, "completed")
    assert done.result == {"payload": [1, 2], "snoozes": 1}
    assert not JobError.objects.filter(job=done).exists()
