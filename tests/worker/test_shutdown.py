"""Graceful shutdown with real signals (ojs-graceful-shutdown §4-§5)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import django_ojs
from django_ojs.models import Job, JobError, Worker

from .conftest import PATIENCE, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def runs_of(job) -> list[Execution]:
    return list(Execution.objects.filter(job_id=job.id).order_by("attempt"))


def test_sigterm_lets_running_jobs_finish_then_exits_cleanly(worker):
    # A grace period far longer than the jobs: they finish within it however busy the machine.
    process = worker("--concurrency", "10", "--grace-period", "120")
    jobs = [django_ojs.enqueue("probe.record", [2.0]) for _ in range(5)]
    wait_until(lambda: Execution.objects.count() == 5, PATIENCE, "5 running jobs")

    signalled, signalled_wall = time.monotonic(), time.time()
    process.send(signal.SIGTERM)
    status = process.wait(timeout=300)
    drain_seconds, exited_wall = time.monotonic() - signalled, time.time()

    assert status == 0, process.output
    for job in jobs:  # let finish, not failed by the grace period
        job.refresh_from_db()
        assert job.state == "completed" and job.attempt == 1
        [run] = runs_of(job)  # exactly one execution, which finished
        assert run.finished_at is not None
    assert not Worker.objects.exists()
    assert "shutting down (SIGTERM)" in process.output
    last_finished = max(run.finished_at for run in Execution.objects.all())
    first_started = min(run.started_at for run in Execution.objects.all())
    print(
        f"\ndrain: SIGTERM to exit 0 took {drain_seconds:.2f} s with 5 jobs of 2 s running "
        f"(signalled {signalled_wall - first_started.timestamp():.2f} s after the first started; "
        f"exit {exited_wall - last_finished.timestamp():.2f} s after the last finished)"
    )


def test_sigint_is_a_graceful_shutdown_too(worker):
    process = worker("--grace-period", "120")
    job = django_ojs.enqueue("probe.record", [1.0])
    wait_until(lambda: Execution.objects.exists(), PATIENCE, "the job to start")
    process.send(signal.SIGINT)
    assert process.wait(timeout=300) == 0
    job.refresh_from_db()
    assert job.state == "completed"


def test_jobs_outliving_the_grace_period_fail_with_shutdown_error_and_run_again_elsewhere(worker):
    first = worker("--grace-period", "1")
    jobs = [django_ojs.enqueue("probe.record", [0.1, 3600]) for _ in range(3)]
    wait_until(lambda: Execution.objects.count() == 3, PATIENCE, "3 running jobs")

    first.send(signal.SIGTERM)
    assert first.wait(timeout=PATIENCE) == 0, first.output  # the grace period, not the jobs' hour
    # Its summary says them released, not failed: as the store has them, no failure of theirs.
    assert re.search(r"stopped: 0 completed, 0 failed, 3 released, 0 parked, 0 dropped", first.output), first.output
    for job in jobs:  # and which: a line each, in the summary's word, as every failed attempt has one
        assert re.search(
            rf"job {job.id} \(probe.record\) attempt 1 released: ShutdownError: the worker shut down; "
            r"the job was still running after the 1s grace period; back in its queue now, the attempt not charged",
            first.output,
        ), first.output
    assert not Worker.objects.exists()
    for job in jobs:
        job.refresh_from_db()
        # Released at once, the attempt not charged: an interruption is not the job's fault.
        assert job.state == "available"
        [error] = JobError.objects.filter(job=job)
        assert (error.type, error.retryable, error.attempt) == ("ShutdownError", True, 1)

    second = worker()
    wait_until(lambda: Job.objects.filter(state="completed").count() == 3, PATIENCE, "the retries to complete")
    for job in jobs:
        first_run, second_run = runs_of(job)
        assert first_run.pid == first.pid and first_run.finished_at is None  # interrupted
        assert second_run.pid == second.pid and second_run.finished_at is not None
    assert Execution.objects.count() == 6


def test_heartbeats_and_progress_logs_go_on_while_draining_and_a_second_sigterm_forces_the_stop(worker):
    process = worker("--grace-period", "3600")
    job = django_ojs.enqueue("probe.record", [0.1, 3600])
    wait_until(lambda: Execution.objects.exists(), PATIENCE, "the job to start")
    process.send(signal.SIGTERM)
    process.wait_for_output("shutting down")
    draining_since = Worker.objects.get().last_heartbeat_at
    # ojs-graceful-shutdown §5.2: the remaining count every 5 s, heartbeats all along.
    process.wait_for_output(r"draining: still running 1 job\(s\)")
    row = Worker.objects.get()
    assert row.state == "terminate" and row.last_heartbeat_at > draining_since
    assert row.active_job_ids == [str(job.id)]
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0  # not the hour of grace period
    job.refresh_from_db()
    assert job.state == "available"
    assert JobError.objects.get(job=job).type == "ShutdownError"
    assert "forcing the stop" in process.output


def can_make_pid_namespaces() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not can_make_pid_namespaces(), reason="needs unshare and the right to make a PID namespace")
def test_the_worker_shuts_down_gracefully_as_pid_1(processes):
    """As PID 1 the kernel drops signals that have no handler: the worker installs its own."""
    process = processes("ojs_worker", "--heartbeat-interval", "0.5", prefix=["unshare", "--pid", "--fork", "--mount-proc"])
    process.wait_for_output(r"worker \S+ started \(pid 1\)")
    job = django_ojs.enqueue("probe.record", [1.5])
    wait_until(lambda: Execution.objects.exists(), PATIENCE, "the job to start")
    [worker_pid] = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    os.kill(int(worker_pid), signal.SIGTERM)  # the worker itself, PID 1 of its namespace
    assert process.wait(timeout=PATIENCE) == 0, process.output
    job.refresh_from_db()
    assert job.state == "completed"
    assert not Worker.objects.exists()


def test_sigterm_while_waiting_for_the_database_to_register_is_a_clean_stop(processes):
    """A deployment may stop a worker that never reached the database: exit 0, not death by the signal."""
    with socket.socket() as probe:  # a port nothing listens on: the database is unreachable
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = processes("ojs_worker", env={"DATABASE_URL": f"postgres://postgres@127.0.0.1:{port}/nowhere"})
    process.wait_for_output(r"worker: database unavailable")
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0, process.output
    assert re.search(r"worker \S+ stopped before it could register: it held nothing", process.output)
