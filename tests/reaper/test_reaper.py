"""The Reaper that runs the loops, manage.py ojs_reaper, and reapers running side by side."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import DatabaseError, OperationalError, connection, connections

from django_ojs.core import maintenance
from django_ojs.models import CronJob, Job, JobError, ReaperTick, Worker
from django_ojs.protocol.cron_jobs import CronSpec
from django_ojs.reaper import MAX_ROUNDS, Loop, Reaper
from tests.helpers import ago, database_url, race, reload
from tests.waiting import PATIENCE, wait_until


def due_scheduled(spec, count, queue="timed"):
    jobs = Job.objects.push_many([spec(options={"queue": queue, "delay_until": "2999-01-01T00:00:00Z"})
                                  for _ in range(count)])
    Job.objects.filter(queue=queue).update(run_at=ago(seconds=1))
    return jobs


def lapsed_active(spec, count, queue="leased"):
    Job.objects.push_many([spec(options={"queue": queue}) for _ in range(count)])
    while Job.objects.fetch([queue], count=1000, worker_id="gone"):
        pass
    Job.objects.filter(queue=queue).update(lease_expires_at=ago(seconds=1))


def test_one_tick_runs_every_loop_once(transactional_db, spec):
    due_scheduled(spec, 2)
    lapsed_active(spec, 1)
    moved = Reaper().tick()
    assert set(moved) == {
        "tick", "cron-sync", "promote", "expire", "leases", "timeouts", "workers", "cron", "prune", "history"}
    # The tick is recorded, by the database clock, for the overview's "no reaper for N s".
    [row] = ReaperTick.objects.all()
    assert row.last_tick_at == row.started_at and row.pid == os.getpid()
    assert (moved["promote"], moved["leases"], moved["expire"]) == (2, 1, 0)


def test_a_loop_repeats_while_its_batches_come_back_full(transactional_db, spec):
    due_scheduled(spec, 5)
    assert Reaper(batch_size=2).tick()["promote"] == 5


def test_a_loop_stops_after_max_rounds_so_others_get_their_turn(transactional_db, spec):
    due_scheduled(spec, MAX_ROUNDS + 5)
    reaper = Reaper(batch_size=1)
    assert reaper.tick(now=0)["promote"] == MAX_ROUNDS
    assert reaper.tick(now=10**6)["promote"] == 5


def test_loops_run_on_their_own_intervals(transactional_db):
    ran: list[str] = []
    reaper = Reaper([Loop("fast", lambda limit: ran.append("fast") or 0, 1.0),
                     Loop("slow", lambda limit: ran.append("slow") or 0, 10.0)])
    for now in (0, 0.5, 1.0, 2.0, 10.0):
        reaper.tick(now=now)
    assert Counter(ran) == {"fast": 4, "slow": 2}


def test_a_failing_loop_is_logged_and_the_others_still_run(transactional_db, spec, caplog):
    def broken(limit):
        raise DatabaseError("connection lost")

    due_scheduled(spec, 1)
    reaper = Reaper([Loop("broken", broken, 1.0), Loop("promote", Job.objects.promote_due, 1.0)])
    assert reaper.tick() == {"broken": 0, "promote": 1}
    assert "reaper loop broken failed" in caplog.text


def test_an_outage_is_logged_once_and_silence_is_judged_only_a_heartbeat_timeout_after_it(
    transactional_db, ojs, caplog, monkeypatch
):
    """Workers could not beat while the database was away: the reaper gives them time to."""
    import psycopg

    from django_ojs.observe import outage

    ojs(HEARTBEAT_TIMEOUT=3)
    clock = [100.0]
    monkeypatch.setattr(outage.time, "monotonic", lambda: clock[0])
    database_up = [False]
    ran: list[str] = []

    def run(name):
        def loop(limit):
            if not database_up[0]:
                error = OperationalError("connection failed: Connection refused")
                error.__cause__ = psycopg.OperationalError("connection failed: Connection refused")
                raise error
            ran.append(name)
            return 0

        return loop

    reaper = Reaper([Loop("promote", run("promote"), 0.0), Loop("workers", run("workers"), 0.0, judges_silence=True)])
    for _ in range(10):
        reaper.tick()
    database_up[0] = True
    clock[0] += 10
    reaper.tick()
    assert ran == ["promote"]
    clock[0] += 3
    reaper.tick()
    assert ran == ["promote", "promote", "workers"]
    messages = [r.getMessage() for r in caplog.records if r.name == "django_ojs.reaper"]
    assert messages == [
        "reaper: database unavailable (connection failed: Connection refused); retrying until it is back",
        "reaper: database available again after 10.0s",
    ]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's file lock")
def test_a_sqlite_writer_holding_the_lock_past_the_timeout_declares_no_worker_dead(
    transactional_db, ojs, caplog, monkeypatch
):
    """A shell's BEGIN IMMEDIATE held past the busy timeout held every heartbeat back as long as
    the reaper's own writes: when it commits, the reaper gives the workers a HEARTBEAT_TIMEOUT to
    beat again, as after an outage, instead of winning the lock first and declaring them all dead.
    Said in one line each way, no traceback."""
    import sqlite3

    from django_ojs.observe import outage

    ojs(HEARTBEAT_TIMEOUT=3)
    clock = [100.0]
    monkeypatch.setattr(outage.time, "monotonic", lambda: clock[0])
    Worker.objects.register("w-live")
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.1)  # its busy wait, cut short
    connection.close()
    shell = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    shell.execute("BEGIN IMMEDIATE")
    reaper = Reaper([Loop("promote", Job.objects.promote_due, 0.0),
                     Loop("workers", maintenance.reap_dead_workers, 0.0, judges_silence=True)])
    try:
        for _ in range(3):
            assert reaper.tick()["promote"] == 0  # locked out: nothing moved, the tick goes on
    finally:
        shell.execute("COMMIT")
        shell.close()
    # The worker could not beat while the lock was held: its last beat is as old as the lock.
    Worker.objects.filter(pk="w-live").update(last_heartbeat_at=ago(seconds=10))
    clock[0] += 10
    reaper.tick()
    assert Worker.objects.get(pk="w-live").declared_dead_at is None
    Worker.objects.beat("w-live")  # it beats again within the timeout
    clock[0] += 3
    assert reaper.tick() == {"promote": 0, "workers": 0}
    assert Worker.objects.get(pk="w-live").declared_dead_at is None
    records = [r for r in caplog.records if r.name == "django_ojs.reaper"]
    assert [r.getMessage() for r in records] == [
        "reaper: SQLite stayed locked by another writer past its timeout (database is locked); "
        "retrying until it is back",
        "reaper: database writable again after 10.0s",
    ]
    assert all(r.exc_info is None for r in records)


def test_run_forever_keeps_time_until_stopped(transactional_db, spec, ojs):
    ojs(REAPER_INTERVAL=0.05)
    reaper = Reaper()
    runner = threading.Thread(target=lambda: (reaper.run_forever(), connections.close_all()))
    runner.start()
    try:
        [job] = due_scheduled(spec, 1)
        deadline = time.monotonic() + 120  # a failure bound for a loaded machine, not a wait
        while reload(job).state != "available":
            assert time.monotonic() < deadline, "the reaper never promoted the due job"
            time.sleep(0.05)
    finally:
        reaper.stop()
        runner.join(120)
    assert not runner.is_alive()


def test_a_long_housekeeping_pass_never_holds_the_timekeeping(transactional_db, spec):
    """A prune pass can take long (a day partition of a million jobs, whose events go with it,
    took close to a minute): it runs in a thread of its own, so due jobs are promoted meanwhile,
    also while the reaper, told to stop, waits for the pass to end; and then it stops."""
    started, release = threading.Event(), threading.Event()

    def long_prune(limit: int) -> dict[str, int]:
        started.set()
        release.wait(PATIENCE)  # the pass's long work
        return maintenance.prune(limit)

    reaper = Reaper([Loop("promote", maintenance.promote_due, 0.05), Loop("prune", long_prune, 0.05)])
    runner = threading.Thread(target=lambda: (reaper.run_forever(), connections.close_all()))
    runner.start()
    try:
        wait_until(started.is_set, PATIENCE, "the prune pass to begin")
        [job] = due_scheduled(spec, 1)
        wait_until(lambda: reload(job).state == "available", 60, "the due job promoted while the prune pass runs")
        # Told to stop, it keeps time while the pass ends (up to HOUSEKEEPING_STOP_WAIT).
        reaper.stop()
        [job] = due_scheduled(spec, 1, queue="while-stopping")
        wait_until(lambda: reload(job).state == "available", 60, "the due job promoted while the reaper stops")
    finally:
        release.set()
        reaper.stop()
        runner.join(PATIENCE)
    assert not runner.is_alive()


@pytest.mark.postgres
def test_the_housekeeping_losing_its_connection_is_no_outage_of_the_timekeeping(transactional_db, spec, ojs):
    """An operator's ``pg_terminate_backend`` of a long prune DELETE drops the housekeeping
    thread's connection. That is its own outage: lapsed leases are still recovered at once, not
    after a ``HEARTBEAT_TIMEOUT`` spent waiting for workers to beat again after an outage."""
    ojs(HEARTBEAT_TIMEOUT=600)

    def terminated_prune(limit: int) -> dict[str, int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return {}

    reaper = Reaper([Loop("leases", maintenance.requeue_lapsed, 0.05, judges_silence=True),
                     Loop("prune", terminated_prune, 0.05)])
    runner = threading.Thread(target=lambda: (reaper.run_forever(), connections.close_all()))
    runner.start()
    try:
        wait_until(lambda: reaper._housekeeping_outage.failures, PATIENCE, "the prune's connection dropped")
        lapsed_active(spec, 1)
        wait_until(lambda: Job.objects.filter(queue="leased", state="available").exists(), 60,
                   "the lapsed lease recovered while the housekeeping thread is without its connection")
    finally:
        reaper.stop()
        runner.join(PATIENCE)
    assert not runner.is_alive()


def test_the_management_command_runs_every_loop_once(transactional_db, spec):
    due_scheduled(spec, 1)
    Worker.objects.register("dead")
    Worker.objects.filter(id="dead").update(last_heartbeat_at=ago(hours=1))
    out = io.StringIO()
    call_command("ojs_reaper", "--once", stdout=out)
    assert "promote 1" in out.getvalue() and "workers 0" in out.getvalue()
    assert Job.objects.get().state == "available"
    assert Worker.objects.get().declared_dead_at is not None


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_the_reaper_process_keeps_time_and_stops_cleanly_on_a_signal(transactional_db, spec, stop_signal):
    env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "example_project.settings",
           "OJS_LOG_LEVEL": "WARNING"}
    repo = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryFile() as log:
        reaper = subprocess.Popen([sys.executable, "manage.py", "ojs_reaper", "--interval", "0.1"],
                                  cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            [job] = due_scheduled(spec, 1)
            deadline = time.monotonic() + 120  # a failure bound, not a wait
            while reload(job).state != "available":
                assert reaper.poll() is None, "the reaper exited early"
                assert time.monotonic() < deadline, "the reaper process never promoted the due job"
                time.sleep(0.1)
            reaper.send_signal(stop_signal)
            assert reaper.wait(120) == 0
        finally:
            if reaper.poll() is None:
                reaper.kill()
                reaper.wait(30)
            log.seek(0)
            output = log.read().decode(errors="replace")
        assert "Traceback" not in output, output


def test_two_reapers_side_by_side_never_do_a_row_twice(transactional_db, spec):
    due_scheduled(spec, 1000)
    lapsed_active(spec, 1000)
    for n in range(30):
        CronJob.objects.register(CronSpec(name=f"cron-{n}", expression="* * * * *", timezone="UTC",
                                          job_template={"type": "tick", "args": [n], "options": {"queue": "cron"}}))
    CronJob.objects.update(next_run_at=ago(seconds=1))
    totals: list[Counter] = []

    def reap() -> None:
        moved: Counter = Counter()
        totals.append(moved)
        reaper = Reaper(batch_size=40)
        clock = 0.0
        while True:
            clock += 10**6  # every loop is due at every tick
            tick = reaper.tick(now=clock)
            moved.update(tick)
            if not any(tick.values()):
                return

    race([reap, reap])
    both = totals[0] + totals[1]
    assert (both["promote"], both["leases"], both["cron"]) == (1000, 1000, 30)
    assert Job.objects.filter(queue="timed", state="available").count() == 1000
    assert Job.objects.filter(queue="leased", state="available").count() == 1000
    # Each lapsed lease recorded exactly one error; each schedule fired exactly one job.
    assert set(Counter(JobError.objects.values_list("job_id", flat=True)).values()) == {1}
    assert JobError.objects.count() == 1000
    assert sorted(Job.objects.filter(queue="cron").values_list("cron_name", flat=True)) == sorted(
        f"cron-{n}" for n in range(30))
