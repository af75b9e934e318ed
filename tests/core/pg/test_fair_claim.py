"""The fair claim reads the fair index, bounded by the values waiting; an unfair claim is planned as before.

``OJS_FAIRNESS_BENCH=1 pytest -s tests/core/pg/test_fair_claim.py`` also times claims on
100,000 waiting jobs and prints the figures: an unfair queue's claim with and without
``ojs_job_fair`` (alternated, in one run), a fair queue's with 2 and with 1,000 values waiting.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_ojs.core import queue_config, queue_settings
from django_ojs.models import Job, Queue
from tests.helpers import live_index

from .test_query_plans import BACKLOG, fill, plan_of, seq_scans

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TWO_TENANTS = "CASE WHEN g <= 100 THEN 'small' ELSE 'big' END"


@pytest.fixture
def one_statement(settings):
    """The PostgreSQL engine's statements, whatever ``OJS_TEST_ENGINE`` says."""
    settings.OJS = {**getattr(settings, "OJS", {}), "ONE_STATEMENT_PATHS": True}


def make_fair(queue: str = "plans") -> None:
    # The row as the configuration stores it, without rekeying: the fill set each job's value.
    Queue.objects.update_or_create(name=queue, defaults={"fairness_key": "meta.tenant"})
    queue_settings.forget()


def statements_of(operation) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        operation()
    return [q["sql"] for q in queries.captured_queries]


def test_the_stepwise_fair_claim_reads_the_fair_index_and_no_backlog(settings):
    settings.OJS = {**getattr(settings, "OJS", {}), "ONE_STATEMENT_PATHS": False}
    fill("available", BACKLOG, fair_key=TWO_TENANTS)
    fill("completed", BACKLOG, finished_at="now()", fair_key=TWO_TENANTS)
    make_fair()
    statements = statements_of(lambda: Job.objects.fetch(["plans"], count=10))
    reads = [sql for sql in statements if "fair_key" in sql and "fairturn" not in sql
             and sql.lstrip().startswith(("WITH", "SELECT"))]
    assert len(reads) >= 3, statements  # the values waiting, then one probe per value served
    for sql in reads:
        plan = plan_of(sql)
        assert "ojs_job_fair" in plan, plan
        assert not seq_scans(plan) and "Sort" not in plan, plan


def test_an_unfair_claim_has_the_plan_and_cost_it_had_before_the_fair_index():
    fill("available", BACKLOG)
    fill("completed", BACKLOG, finished_at="now()")
    statement = next(sql for sql in statements_of(lambda: Job.objects.fetch(["plans"], count=10))
                     if "FOR UPDATE SKIP LOCKED" in sql)
    with_index = plan_of(statement)
    with connection.cursor() as cursor:  # the index dropped in a transaction rolled back
        cursor.execute("BEGIN")
        try:
            cursor.execute(f"DROP INDEX {live_index('ojs_job_fair')}")
            cursor.execute("EXPLAIN " + statement)
            without_index = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("ROLLBACK")
    assert "ojs_job_fair" not in with_index
    assert with_index == without_index


def claim_micros(queue: str, rounds: int) -> list[float]:
    timings = []
    for _ in range(rounds):
        began = time.perf_counter()
        assert len(Job.objects.fetch([queue], count=10)) == 10
        timings.append((time.perf_counter() - began) * 1e6)
    return timings


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("OJS_FAIRNESS_BENCH"), reason="opt-in: OJS_FAIRNESS_BENCH=1 (prints figures)")
def test_opt_in_claim_cost_on_a_hundred_thousand_waiting_jobs():
    fill("available", 100_000, queue="unfair")
    for _ in range(20):  # warm up: connection, prepared statements, caches
        Job.objects.fetch(["unfair"], count=10)
    runs: dict[str, list[float]] = {"with ojs_job_fair": [], "without": []}
    for _ in range(5):  # alternated, so drift in the machine's load falls on both alike
        runs["with ojs_job_fair"] += claim_micros("unfair", 200)
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX ojs_job_fair")
        runs["without"] += claim_micros("unfair", 200)
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE INDEX ojs_job_fair ON {Job._meta.db_table} (queue, fair_key, priority DESC, seq)"
                " WHERE state = 'available' AND fair_key IS NOT NULL"
            )
    figures = {name: round(statistics.median(values)) for name, values in runs.items()}
    print(f"\nunfair queue, 100,000 waiting, FETCH 10, p50 µs: {figures}")
    for tenants, expression in ((2, TWO_TENANTS), (1000, "'t' || (g %% 1000)")):
        fill("available", 100_000, queue=f"fair{tenants}", fair_key=expression)
        make_fair(f"fair{tenants}")
        claim_micros(f"fair{tenants}", 20)
        print(f"fair queue, 100,000 waiting, {tenants} values, FETCH 10, p50 µs: "
              f"{round(statistics.median(claim_micros(f'fair{tenants}', 500)))}")


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("OJS_FAIRNESS_BENCH"), reason="opt-in: OJS_FAIRNESS_BENCH=1 (prints figures)")
def test_opt_in_a_key_change_on_a_hundred_thousand_waiting_jobs():
    """How long changing the key of a queue with 100,000 waiting jobs takes, and what FETCH of
    that queue gets meanwhile (the change rewrites the waiting jobs newest first, so the oldest,
    which FETCH takes, are locked last)."""
    fill("available", 100_000, queue="rekeyed", fair_key="'t' || (g %% 1000)")
    make_fair("rekeyed")
    Job.objects.filter(queue="rekeyed").update(args=["x"])  # where the new key points
    took: list[float] = []

    def change() -> None:
        try:
            began = time.perf_counter()
            queue_config.update("rekeyed", queue_config.parse_config({"fairness_key": "args.0"}, "rekeyed"))
            took.append(time.perf_counter() - began)
        finally:
            connection.close()

    changing = threading.Thread(target=change)
    fetched = empty = 0
    changing.start()
    while changing.is_alive():
        jobs = Job.objects.fetch(["rekeyed"], count=1)
        fetched += len(jobs)
        empty += not jobs
    changing.join()
    assert Job.objects.filter(queue="rekeyed", state="available").exclude(fair_key="x").count() == 0
    print(f"\nkey change of 100,000 waiting jobs: {took[0]:.2f} s; FETCH 1 meanwhile: {fetched} jobs, "
          f"{empty} empty")


def test_a_fair_claim_on_its_own_is_one_statement_in_weighted_turns(one_statement):
    from django_ojs.core import queue_config
    from django_ojs.models import FairTurn

    queue_config.update("plans", queue_config.parse_config(
        {"fairness_key": "meta.tenant", "fairness_weights": {"acme": 3}}, "plans"))
    fill("available", 20, fair_key="CASE WHEN g <= 10 THEN 'acme' ELSE 'small' END")
    # Long past: no job pushed under an older configuration left to mend.
    Queue.objects.filter(name="plans").update(updated_at=timezone.now() - dt.timedelta(hours=1))
    queue_settings.forget()
    # The first claim after the change mends its stragglers once, then claims in its statement.
    tenants = [job.fair_key for job in Job.objects.fetch(["plans"], count=1)]
    for count in (4, 3):
        statements = statements_of(lambda count=count: tenants.extend(
            job.fair_key for job in Job.objects.fetch(["plans"], count=count)))
        assert len(statements) == 1, statements
    assert tenants == ["acme", "acme", "acme", "small", "acme", "acme", "acme", "small"]
    turns = {row.fair_key: (row.turn, row.used) for row in FairTurn.objects.filter(queue="plans")}
    assert turns == {"acme": (3, 0), "small": (4, 0)}


def server_micros(statements: list[str]) -> tuple[float, float]:
    """The statements of one claim replayed under EXPLAIN ANALYZE in a transaction rolled back:
    the server's execution and planning time, in µs, summed."""
    executing = planning = 0.0
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        try:
            for sql in statements:
                if not sql.lstrip().upper().startswith(("WITH", "SELECT", "UPDATE", "INSERT", "DELETE")):
                    continue  # BEGIN, COMMIT, SAVEPOINT ...
                cursor.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + sql.replace("%%", "%"))
                report = cursor.fetchone()[0]
                report = (report if isinstance(report, list) else json.loads(report))[0]
                executing += report["Execution Time"] * 1000
                planning += report["Planning Time"] * 1000
        finally:
            cursor.execute("ROLLBACK")
    return executing, planning


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("OJS_FAIRNESS_BENCH"), reason="opt-in: OJS_FAIRNESS_BENCH=1 (prints figures)")
def test_opt_in_the_fair_statement_against_the_steps(settings):
    """FETCH 10 of a fair queue on 100,000 waiting jobs, 2 and 100 values, stepwise and in one statement,
    alternated in one run: wall time, statements, and the server's time per claim (EXPLAIN ANALYZE).
    The event store off: the steps' events carry their ids, which a replay could not insert again."""
    base = {**getattr(settings, "OJS", {}), "EVENTS": False}
    for tenants, expression in ((2, TWO_TENANTS), (100, "'t' || (g %% 100)")):
        queue = f"fair{tenants}"
        fill("available", 100_000, queue=queue, fair_key=expression)
        Queue.objects.update_or_create(name=queue, defaults={"fairness_key": "meta.tenant",
                                                               "updated_at": timezone.now() - dt.timedelta(hours=1)})
        figures: dict[str, dict[str, list[float]]] = {}
        for _ in range(3):  # alternated, so drift in the machine's load falls on both alike
            for mode, one_statement in (("steps", False), ("statement", True)):
                settings.OJS = {**base, "ONE_STATEMENT_PATHS": one_statement}
                queue_settings.forget()
                claim_micros(queue, 10)  # warm up
                runs = figures.setdefault(mode, {"wall": [], "statements": [], "exec": [], "plan": []})
                runs["wall"] += claim_micros(queue, 100)
                for _ in range(20):
                    statements = statements_of(lambda queue=queue: Job.objects.fetch([queue], count=10))
                    executing, planning = server_micros(statements)
                    runs["statements"].append(len(statements))
                    runs["exec"].append(executing)
                    runs["plan"].append(planning)
        for mode, runs in figures.items():
            print(f"\nfair queue, 100,000 waiting, {tenants} values, FETCH 10, {mode}: "
                  + ", ".join(f"{name} p50 {statistics.median(values):,.0f}" for name, values in runs.items()))


def test_the_fair_statement_starts_a_job_as_the_plain_claim_does(spec, one_statement):
    """pg/fair_claim.py's ``claimed`` is pg/claim.py's, to the letter: the same columns written,
    the same attempt charged, lease and deadline, the same ``job.started`` event."""
    from django_ojs.core import workers
    from django_ojs.models import Event

    make_fair("fair")
    Queue.objects.filter(name="fair").update(updated_at=timezone.now() - dt.timedelta(hours=1))
    queue_settings.forget()
    workers.register("w-1")
    started = {}
    for queue in ("plain", "fair"):
        pushed = Job.objects.push(spec(meta={"tenant": "t"}, options={"queue": queue, "timeout": 300}))
        statements = statements_of(
            lambda queue=queue: Job.objects.fetch([queue], worker_id="w-1", visibility_timeout=dt.timedelta(minutes=7)))
        assert any("RECURSIVE" in sql for sql in statements) == (queue == "fair")
        job = Job.objects.get(pk=pushed.pk)
        event = Event.objects.get(job_id=job.id, type="job.started")
        started[queue] = (job.state, job.attempt, job.worker_id, job.lease_expires_at - job.started_at,
                          job.deadline_at - job.started_at, event.time == job.started_at,
                          {name: value for name, value in event.data.items() if name not in ("queue", "job_id")})
    assert started["fair"] == started["plain"] == (
        "active", 1, "w-1", dt.timedelta(minutes=7), dt.timedelta(minutes=5), True,
        {"state": "active", "attempt": 1, "job_type": "test.job", "worker_id": "w-1"})
