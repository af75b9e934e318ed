"""Quiet and resume by signal (SIGTSTP / SIGCONT) and by the server's heartbeat directives."""

from __future__ import annotations

import json
import signal
import socket
import urllib.error
import urllib.request

import pytest
from django.db import connection
from django.urls import reverse

import django_ojs
from django_ojs.models import Job, Worker
from django_ojs.protocol.states import WorkerState

from .conftest import PATIENCE, heartbeats_pass, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def readiness(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def worker_state() -> str | None:
    row = Worker.objects.first()
    return row.state if row else None


def test_sigtstp_stops_fetching_while_running_jobs_finish_and_sigcont_resumes(worker):
    port = free_port()
    process = worker("--concurrency", "4", "--health-port", str(port), "--health-host", "127.0.0.1")
    wait_until(lambda: readiness(port)[0] == 200, PATIENCE, "the readiness probe")
    running = [django_ojs.enqueue("probe.record", [1.5]) for _ in range(2)]
    wait_until(lambda: Execution.objects.count() == 2, PATIENCE, "2 running jobs")

    process.send(signal.SIGTSTP)
    process.wait_for_output(r"quiet \(SIGTSTP\)")
    waiting = [django_ojs.enqueue("probe.record", [0]) for _ in range(2)]
    wait_until(lambda: Job.objects.filter(id__in=[j.id for j in running], state="completed").count() == 2,
               PATIENCE, "the running jobs to finish")
    assert readiness(port) == (503, {"ready": False, "state": "quiet"})
    wait_until(lambda: worker_state() == "quiet", PATIENCE, "the heartbeat to report quiet")
    heartbeats_pass(4)  # and as many fetch turns: a running worker would have fetched them
    assert set(Job.objects.filter(id__in=[j.id for j in waiting]).values_list("state", flat=True)) == {"available"}

    process.send(signal.SIGCONT)
    wait_until(lambda: Job.objects.filter(state="completed").count() == 4, PATIENCE, "the waiting jobs to run")
    assert readiness(port)[0] == 200
    wait_until(lambda: worker_state() == "running", PATIENCE, "the heartbeat to report running")
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0


def test_sigcont_does_not_undo_a_shutdown(worker):
    process = worker("--grace-period", "20")
    job = django_ojs.enqueue("probe.record", [1.5])
    wait_until(lambda: Execution.objects.exists(), PATIENCE, "the job to start")
    process.send(signal.SIGTERM)
    process.wait_for_output("shutting down")
    process.send(signal.SIGCONT)
    late = django_ojs.enqueue("probe.record", [0])
    assert process.wait(timeout=PATIENCE) == 0
    job.refresh_from_db()
    late.refresh_from_db()
    assert (job.state, late.state) == ("completed", "available")


def test_quiet_running_and_terminate_directives_are_obeyed_at_the_next_heartbeat(worker):
    process = worker()
    worker_id = process.wait_for_output(r"worker (\S+) started").group(1)

    Worker.objects.set_directive([worker_id], WorkerState.QUIET)
    process.wait_for_output(r"quiet \(the server's quiet directive\)")
    wait_until(lambda: worker_state() == "quiet", PATIENCE, "the heartbeat to report quiet")
    idle = django_ojs.enqueue("probe.record", [0])
    heartbeats_pass(4)  # a running worker would have fetched it by now
    idle.refresh_from_db()
    assert idle.state == "available"

    Worker.objects.set_directive([worker_id], WorkerState.RUNNING)
    wait_until(lambda: Job.objects.filter(id=idle.id, state="completed").exists(), PATIENCE, "the worker to resume")

    busy = django_ojs.enqueue("probe.record", [1.0])
    wait_until(lambda: Execution.objects.filter(job_id=busy.id).exists(), PATIENCE, "the job to start")
    Worker.objects.set_directive([worker_id], WorkerState.TERMINATE)
    assert process.wait(timeout=PATIENCE) == 0
    busy.refresh_from_db()
    assert busy.state == "completed"
    assert not Worker.objects.exists()
    assert "shutting down (the server's terminate directive)" in process.output


def test_the_admins_resume_of_a_worker_quiet_by_sigtstp_resumes_it(worker, admin_client):
    """Its directive was "running" all along: the Resume changed nothing, and the console said
    "running requested, not applied yet" for as long as the worker lived."""
    process = worker()
    worker_id = process.wait_for_output(r"worker (\S+) started").group(1)
    process.send(signal.SIGTSTP)
    process.wait_for_output(r"quiet \(SIGTSTP\)")
    wait_until(lambda: worker_state() == "quiet", PATIENCE, "the heartbeat to report quiet")
    admin_client.post(reverse("admin:django_ojs_worker_changelist"),
                      {"action": "resume_workers", "_selected_action": [worker_id]})
    job = django_ojs.enqueue("probe.record", [0])
    wait_until(lambda: Job.objects.filter(id=job.id, state="completed").exists(), PATIENCE, "the worker to resume")
    wait_until(lambda: worker_state() == "running", PATIENCE, "the heartbeat to report running")
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0


def test_an_idle_worker_wakes_up_on_notification_not_polling(worker):
    """The fallback poll is set to 10 minutes: a job picked up sooner came through LISTEN/NOTIFY."""
    process = worker(env={"OJS_LISTEN_POLL_INTERVAL": "600"})
    # Idle: listening, and past its first fetch (heartbeats follow it).
    wait_until(listening, PATIENCE, "the worker to LISTEN")
    heartbeats_pass(2)
    job = django_ojs.enqueue("probe.record", [0])
    wait_until(lambda: Job.objects.filter(id=job.id, state="completed").exists(), 300, "the notified worker")
    process.send(signal.SIGTERM)
    assert process.wait(timeout=PATIENCE) == 0


def listening() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'")
        return cursor.fetchone() is not None
