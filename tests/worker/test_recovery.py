"""A worker that dies without a word: the reaper recovers its jobs (ojs-worker-protocol §10)."""

from __future__ import annotations

import signal
import time

import pytest

import django_ojs
from django_ojs.models import Job, JobError, Worker

from .conftest import PATIENCE, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FAST_DEATH = {"OJS_HEARTBEAT_TIMEOUT": "2"}


def test_sigkill_mid_job_recovers_the_jobs_and_another_worker_completes_them(worker, reaper):
    doomed = worker(env=FAST_DEATH)
    jobs = [django_ojs.enqueue("probe.record", [0.1, 3600]) for _ in range(3)]
    wait_until(lambda: Execution.objects.count() == 3, PATIENCE, "3 running jobs")
    reaper(env=FAST_DEATH)

    doomed.send(signal.SIGKILL)
    killed = time.monotonic()
    doomed.wait(timeout=PATIENCE)
    wait_until(lambda: Job.objects.filter(state="available").count() == 3, PATIENCE, "the reaper to recover the jobs")
    recovery_seconds = time.monotonic() - killed
    assert Worker.objects.get(pid=doomed.pid).declared_dead_at is not None
    for job in jobs:
        [error] = JobError.objects.filter(job_id=job.seq)
        assert (error.type, error.attempt) == ("worker_death", 1)

    rescuer = worker(env=FAST_DEATH)
    wait_until(lambda: Job.objects.filter(state="completed").count() == 3, PATIENCE, "the jobs to complete")
    for job in jobs:
        job.refresh_from_db()
        assert job.attempt == 2  # the lost attempt was counted
        lost, finished = Execution.objects.filter(job_id=job.id).order_by("attempt")
        assert (lost.attempt, lost.pid, lost.finished_at) == (1, doomed.pid, None)
        assert (finished.attempt, finished.pid) == (2, rescuer.pid) and finished.finished_at is not None
    print(f"\nrecovery: SIGKILL to jobs available again took {recovery_seconds:.2f} s (heartbeat timeout 2 s)")


def test_heartbeats_keep_a_job_longer_than_its_visibility_timeout(worker, reaper):
    reaper()
    worker()
    # Beats every 0.5 s against a 3 s lease: six chances per lease, for a loaded machine.
    job = django_ojs.enqueue("probe.record", [8.0], visibility_timeout=3)
    wait_until(lambda: Job.objects.filter(id=job.id, state="completed").exists(), PATIENCE, "the long job to complete")
    job.refresh_from_db()
    assert job.attempt == 1
    assert not JobError.objects.filter(job=job).exists()
    assert Execution.objects.filter(job_id=job.id).count() == 1


def test_without_heartbeats_the_same_job_would_have_been_requeued(worker, reaper):
    """The control for the test above: heartbeats slower than the visibility timeout lose the lease."""
    reaper()
    worker("--heartbeat-interval", "30")
    job = django_ojs.enqueue("probe.record", [0.1, 8.0], visibility_timeout=3)
    wait_until(lambda: JobError.objects.filter(job=job).exists(), PATIENCE, "the lease to expire")
    assert JobError.objects.get(job=job).type == "visibility_timeout"


def test_ctx_heartbeat_extends_the_lease_between_regular_beats(worker, reaper):
    reaper()
    worker("--heartbeat-interval", "30")
    job = django_ojs.enqueue("probe.heartbeat", [6.0], visibility_timeout=3)
    wait_until(lambda: Job.objects.filter(id=job.id, state="completed").exists(), PATIENCE, "the job to complete")
    assert not JobError.objects.filter(job=job).exists()
