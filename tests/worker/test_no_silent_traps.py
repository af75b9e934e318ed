"""What a new project sees from its processes: logs without LOGGING, and workers that say what they miss."""

from __future__ import annotations

import signal

import pytest

import django_ojs
from django_ojs.models import Job, ReaperTick

from .conftest import PATIENCE, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BARE = {"DJANGO_SETTINGS_MODULE": "tests.worker.settings_bare", "OJS_HEARTBEAT_TIMEOUT": "2"}


def test_without_logging_worker_and_reaper_log_start_stop_and_recovery_to_stderr(worker, reaper):
    doomed = worker(env=BARE)  # waits for "worker ... started" in its output
    assert "INFO django_ojs.worker: worker" in doomed.output  # our stderr handler's format
    django_ojs.enqueue("probe.record", [0.1, 3600])
    wait_until(lambda: Execution.objects.count() == 1, PATIENCE, "the job to run")
    keeper = reaper(env=BARE)
    keeper.wait_for_output(r"reaper started")

    doomed.send(signal.SIGKILL)
    doomed.wait(timeout=PATIENCE)
    keeper.wait_for_output(r"recovered 1 job\(s\) of workers declared dead")
    wait_until(lambda: Job.objects.filter(state="available").exists(), PATIENCE, "the job to be available again")

    keeper.send(signal.SIGTERM)
    assert keeper.wait(timeout=PATIENCE) == 0
    assert "reaper stopped" in keeper.output

    rescuer = worker(env=BARE)
    wait_until(lambda: Job.objects.filter(state="completed").exists(), PATIENCE, "the job to complete")
    rescuer.send(signal.SIGTERM)
    assert rescuer.wait(timeout=PATIENCE) == 0
    assert "stopped: 1 completed" in rescuer.output


def test_a_worker_says_which_handlers_it_does_not_serve(worker):
    elsewhere = worker("--queue", "reports", env=BARE)
    output = elsewhere.wait_for_output(r"this worker reads queues reports, but .*").group(0)
    assert "probe.record -> default" in output
    served = worker("--queue", "default", env=BARE)
    assert "this worker reads queues" not in served.output


def test_check_warns_about_worker_queues_but_a_worker_given_its_queues_does_not(processes, worker):
    elsewhere = {**BARE, "OJS_WORKER_QUEUES": '["reports"]'}
    check = processes("check", env=elsewhere)
    assert check.wait(timeout=PATIENCE) == 0
    assert "django_ojs.W004" in check.output  # WORKER_QUEUES leaves probe.record's queue unread
    # This worker reads the queue W004 worries about: nothing to warn of, at start or from the checks.
    served = worker("--queue", "default", env=elsewhere)
    assert "W004" not in served.output
    assert "this worker reads queues" not in served.output


def test_a_worker_says_at_start_which_waiting_jobs_it_has_no_handler_for_and_leaves_them(worker):
    orphan = django_ojs.enqueue("nobody.handles.this", [1])
    django_ojs.enqueue("nobody.handles.this", [2])
    started = worker(env=BARE)
    line = started.wait_for_output(r"WARNING django_ojs.worker: jobs wait on this worker's queues .*").group(0)
    assert "2 of type nobody.handles.this on default" in line
    ran = django_ojs.enqueue("probe.record", [0])
    wait_until(lambda: Job.objects.get(pk=ran.pk).state == "completed", PATIENCE, "the probe job to complete")
    orphan.refresh_from_db()
    assert (orphan.state, orphan.attempt) == ("available", 0)  # passed over, never claimed


def test_check_warns_of_jobs_no_running_worker_can_run_and_says_nothing_without_a_database(processes, worker):
    worker(env=BARE)
    django_ojs.enqueue("nobody.handles.this", [1])
    check = processes("check", env=BARE)
    assert check.wait(timeout=PATIENCE) == 0
    assert "django_ojs.W006" in check.output
    assert "1 job(s) of type 'nobody.handles.this' on queue 'default'" in check.output

    # A database that is down: check neither fails nor waits for it.
    down = processes("check", env={**BARE, "DATABASE_URL": "postgres://postgres@127.0.0.1:1/nothing"})
    assert down.wait(timeout=PATIENCE) == 0
    assert "W006" not in down.output


def test_a_worker_without_handlers_says_so_and_where_handlers_are_looked_for(worker):
    bare = worker(env={**BARE, "DJANGO_SETTINGS_MODULE": "tests.worker.settings_no_handlers"})
    line = bare.wait_for_output(r"WARNING django_ojs.worker: this worker has no handlers.*").group(0)
    assert "<app>/jobs.py" in line
    served = worker(env=BARE)
    assert "has no handlers" not in served.output


@pytest.mark.parametrize("command", ["ojs_worker", "ojs_reaper"])
def test_worker_and_reaper_refuse_to_start_on_a_database_not_migrated_and_say_so(processes, tmp_path, command):
    unmigrated = {**BARE, "DATABASE_URL": f"sqlite:///{tmp_path / 'never-migrated.sqlite3'}"}
    started = processes(command, env=unmigrated)
    assert started.wait(timeout=PATIENCE) == 1
    assert f"{command} cannot start: the database lacks" in started.output
    assert "Run manage.py migrate first." in started.output
    assert "Traceback" not in started.output


def test_a_worker_says_at_start_that_no_reaper_ticks(worker, reaper):
    alone = worker(env=BARE)
    line = alone.wait_for_output(r"WARNING django_ojs.worker: no reaper has ticked .*").group(0)
    assert "manage.py ojs_reaper" in line
    alone.send(signal.SIGTERM)
    assert alone.wait(timeout=PATIENCE) == 0
    reaper(env=BARE)
    wait_until(lambda: ReaperTick.objects.exists(), PATIENCE, "the reaper's first tick")
    accompanied = worker(env=BARE)
    ran = django_ojs.enqueue("probe.record", [0])  # run by its loop: every line of its start is written by then
    wait_until(lambda: Job.objects.get(pk=ran.pk).state == "completed", PATIENCE, "the probe job to complete")
    assert "no reaper has ticked" not in accompanied.output


def test_a_worker_says_at_start_which_of_its_queues_are_paused(worker):
    from django_ojs.models import Queue

    Queue.objects.pause("default")
    started = worker(env=BARE)
    line = started.wait_for_output(r"WARNING django_ojs.worker: queues this worker reads are paused.*").group(0)
    assert ": default (since " in line and "manage.py ojs resume" in line
    started.send(signal.SIGTERM)
    assert started.wait(timeout=PATIENCE) == 0
    Queue.objects.resume("default")
    again = worker(env=BARE)
    ran = django_ojs.enqueue("probe.record", [0])  # run by its loop: every line of its start is written by then
    wait_until(lambda: Job.objects.get(pk=ran.pk).state == "completed", PATIENCE, "the probe job to complete")
    assert "are paused" not in again.output


def test_with_debug_on_a_worker_keeps_the_queries_of_one_job_not_of_every_job(worker):
    # DEBUG = True (startproject's default) logs every query of every connection, up to 9,000 each:
    # a worker forgets them between jobs, as Django does between requests.
    worker("--concurrency", "1", env={**BARE, "OJS_DEBUG": "1"})
    jobs = [django_ojs.enqueue("probe.queries_logged") for _ in range(5)]
    wait_until(lambda: not Job.objects.exclude(state="completed").exists(), PATIENCE, "the jobs to complete")
    assert {Job.objects.get(pk=job.pk).result for job in jobs} == {1}


def test_a_worker_says_which_slots_handlers_hold_past_their_jobs_end(worker):
    # The worker's row shows no job held while a timed-out handler still runs in its only slot.
    stuck = worker("--concurrency", "1", env=BARE)
    slow = django_ojs.enqueue("probe.record", [3600], timeout=1, retry={"max_attempts": 1})
    line = stuck.wait_for_output(r"WARNING django_ojs.worker: 1 of 1 slots are held by handlers .*").group(0)
    assert f"{slow.id} (probe.record)" in line
    assert "This worker runs nothing until they return" in line
