"""The fair claim reads the fair index, bounded by the values waiting; an unfair claim is planned as before.

``OJS_FAIRNESS_BENCH=1 pytest -s tests/core/pg/test_fair_claim.py`` also times claims on
100,000 waiting jobs and prints the figures: an unfair queue's claim with and without
``ojs_job_fair`` (alternated, in one run), a fair queue's with 2 and with 1,000 values waiting.
"""

from __future__ import annotations

import os
import statistics
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_ojs.core import queue_settings
from django_ojs.models import Job, Queue
from tests.helpers import live_index

from .test_query_plans import BACKLOG, fill, plan_of, seq_scans

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TWO_TENANTS = "CASE WHEN g <= 100 THEN 'small' ELSE 'big' END"


def make_fair(queue: str = "plans") -> None:
    # The row as the configuration stores it, without rekeying: the fill set each job's value.
    Queue.objects.update_or_create(name=queue, defaults={"fairness_key": "meta.tenant"})
    queue_settings.forget()


def statements_of(operation) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        operation()
    return [q["sql"] for q in queries.captured_queries]


def test_the_fair_claim_reads_the_fair_index_and_no_backlog():
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
