"""ctx.checkpoint / ctx.last_checkpoint / ctx.run_step: what a Python handler resumes from; and
ctx.progress's writes, which never fail the handler."""

from __future__ import annotations

import sqlite3

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from django_ojs.core.types import Lease
from django_ojs.handlers.context import JobCancelled, JobContext
from django_ojs.models import Job, JobStep
from django_ojs.protocol.failure import Failure
from tests.helpers import ago, reload, update

pytestmark = pytest.mark.django_db(transaction=True)


def context(job, worker_id="w1") -> JobContext:
    return JobContext(job, worker_id, beat=lambda: None)


def retry(job):
    Job.objects.fail(job.id, Failure(type="Boom", message="x"), lease=Lease(worker_id="w1", attempt=job.attempt))
    update(job, run_at=ago(seconds=1))
    Job.objects.promote_due(10)
    [again] = Job.objects.fetch([job.queue], worker_id="w2")
    return again


def test_a_retry_skips_recorded_steps_and_reads_their_results_and_the_checkpoint(claim):
    job = claim("w1", options={"retry": {"max_attempts": 3, "initial_interval": "PT1S"}})
    first = context(job)
    calls: list[str] = []

    def charge(amount):
        calls.append("charge")
        return ("ch_1", amount)

    assert first.last_checkpoint is None
    assert first.run_step("charge", charge, 10) == ["ch_1", 10]  # as stored: the retry reads the same
    first.checkpoint({"row": 40})
    assert first.last_checkpoint == {"row": 40}
    second = context(retry(job), "w2")
    assert second.last_checkpoint == {"row": 40}
    assert second.steps == {"charge": ["ch_1", 10]}
    assert second.run_step("charge", charge, 10) == ["ch_1", 10]
    assert calls == ["charge"]
    assert second.run_step("ship", lambda: "shipped") == "shipped"
    assert [(s.name, s.attempt) for s in JobStep.objects.order_by("id")] == [("charge", 1), ("ship", 2)]
    assert second.idempotency_key("charge") == f"{job.id}:charge"


def test_an_attempt_that_lost_its_lease_is_told_at_its_next_checkpoint_or_step(claim):
    job = claim("w1", options={"retry": {"max_attempts": 3}})
    ctx = context(job)
    update(job, lease_expires_at=ago(seconds=1))
    Job.objects.requeue_lapsed(10)
    with pytest.raises(JobCancelled):
        ctx.checkpoint({"row": 1})
    ctx = context(job)
    with pytest.raises(JobCancelled):
        ctx.run_step("charge", lambda: 1)
    assert reload(job).checkpoint is None and not JobStep.objects.exists()


def test_values_that_cannot_be_kept_are_a_value_error(claim):
    ctx = context(claim("w1"))
    with pytest.raises(ValueError, match="checkpoint"):
        ctx.checkpoint(["not", "an", "object"])
    with pytest.raises(ValueError, match="charge"):
        ctx.run_step("charge", lambda: object())
    with pytest.raises(ValueError, match="name"):
        ctx.run_step("", lambda: 1)
    assert not JobStep.objects.exists()


def test_async_handlers_run_steps_once_too(claim):
    # As the worker runs an async handler (async_to_sync): the steps' writes run in this thread.
    job = claim("w1", options={"retry": {"max_attempts": 3, "initial_interval": "PT1S"}})
    calls: list[int] = []

    async def label(order_id):
        calls.append(order_id)
        return {"label": f"LBL-{order_id}"}

    assert async_to_sync(context(job).arun_step)("label", label, 7) == {"label": "LBL-7"}
    again = context(retry(job), "w2")
    assert async_to_sync(again.arun_step)("label", label, 7) == {"label": "LBL-7"}
    assert calls == [7]


def test_a_cancelled_context_starts_no_step(claim):
    ctx = context(claim("w1"))
    ctx.cancel("the job was cancelled")
    ran: list[bool] = []
    with pytest.raises(JobCancelled):
        ctx.run_step("charge", lambda: ran.append(True))
    assert ran == [] and not JobStep.objects.exists()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's file lock")
def test_a_progress_report_locked_out_on_sqlite_is_said_in_one_line_without_a_traceback(claim, caplog, monkeypatch):
    """Another writer held SQLite past the busy timeout: the report is dropped (fire-and-forget,
    ojs-progress §4), as the heartbeat's beat is, with a line and not a traceback per report."""
    job = claim("w1")
    ctx = context(job)
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.1)  # its busy wait, cut short
    connection.close()
    shell = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    shell.execute("BEGIN IMMEDIATE")
    try:
        ctx.progress(0.5)  # never raised into the handler
    finally:
        shell.execute("COMMIT")
        shell.close()
    [record] = [r for r in caplog.records if "progress" in r.getMessage()]
    assert record.getMessage() == f"progress of job {job.id} not written (database is locked)"
    assert record.exc_info is None
