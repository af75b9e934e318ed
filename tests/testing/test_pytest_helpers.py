"""django_ojs.testing with pytest: the ojs_jobs (manual) and ojs_inline fixtures."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction

import django_ojs
from django_ojs import testing
from django_ojs.models import Job, JobError

from . import jobs_under_test as handlers


@pytest.fixture(autouse=True)
def _calls():
    handlers.calls.clear()
    yield


def test_manual_mode_stores_and_waits(ojs_jobs):
    handlers.welcome.enqueue("a@example.com")
    django_ojs.enqueue("tt.welcome", ["b@example.com"], queue="vip", meta={"tenant": "acme", "x": 1})

    ojs_jobs.assert_enqueued("tt.welcome", args=["a@example.com"], queue="email")
    ojs_jobs.assert_enqueued("tt.welcome", meta={"tenant": "acme"})
    ojs_jobs.assert_enqueued("tt.welcome", count=2)
    ojs_jobs.refute_enqueued("tt.welcome", args=["c@example.com"])
    assert [job.args for job in ojs_jobs.enqueued_jobs(queue="vip")] == [["b@example.com"]]
    assert handlers.calls == []  # nothing ran
    assert set(Job.objects.values_list("state", flat=True)) == {"available"}


def test_a_failed_assertion_lists_what_was_enqueued(ojs_jobs):
    handlers.welcome.enqueue("a@example.com")
    with pytest.raises(AssertionError) as failed:
        ojs_jobs.assert_enqueued("tt.welcome", args=["z@example.com"])
    message = str(failed.value)
    assert "with args ['z@example.com']" in message and "found 0" in message
    assert "tt.welcome args=['a@example.com'] queue='email'" in message
    with pytest.raises(AssertionError, match=r"expected no job of type 'tt\.welcome'"):
        ojs_jobs.refute_enqueued("tt.welcome")
    with pytest.raises(AssertionError, match="expected 3 job"):
        ojs_jobs.assert_enqueued("tt.welcome", count=3)


def test_the_module_level_helpers_use_the_current_context(ojs_jobs):
    handlers.welcome.enqueue("a@example.com")
    testing.assert_enqueued("tt.welcome", args=("a@example.com",))  # a tuple compares as the stored list
    testing.clear_all()
    testing.refute_enqueued("tt.welcome")
    assert testing.enqueued_jobs() == []


def test_drain_runs_the_queue_retries_included(ojs_jobs):
    job = handlers.flaky.enqueue(2)  # fails twice, backoff 60 s each: drain does not wait
    handlers.welcome.enqueue("a@example.com")
    django_ojs.enqueue("tt.welcome", ["elsewhere"], queue="other")

    ran = ojs_jobs.drain(queue="email")

    # FETCH order: the retry is due at once and is older than the welcome job.
    assert [(r.job.type, r.failed) for r in ran] == [
        ("tt.flaky", True), ("tt.flaky", True), ("tt.flaky", False), ("tt.welcome", False)
    ]
    job.refresh_from_db()
    assert (job.state, job.attempt, job.result) == ("completed", 3, {"attempt": 3})
    assert list(JobError.objects.filter(job=job).values_list("type", flat=True)) == ["MailDown", "MailDown"]
    ojs_jobs.assert_completed("tt.welcome", args=["a@example.com"])
    ojs_jobs.assert_performed("tt.flaky")
    assert Job.objects.get(queue="other").state == "available"  # another queue: left alone
    ojs_jobs.drain()
    assert Job.objects.get(queue="other").state == "completed"


def test_drain_stops_at_exhausted_attempts_and_runs_what_handlers_enqueue(ojs_jobs):
    handlers.flaky.enqueue(5)  # more failures than attempts
    handlers.signup.enqueue("new@example.com")

    ojs_jobs.drain()

    failed = ojs_jobs.assert_failed("tt.flaky")
    assert (failed[0].state, failed[0].attempt) == ("discarded", 3)
    ojs_jobs.assert_completed("tt.welcome", args=["new@example.com"])  # enqueued by tt.signup, drained too


def test_drain_leaves_scheduled_jobs_unless_asked(ojs_jobs):
    handlers.welcome.enqueue("later@example.com", scheduled_at=dt.timedelta(hours=1))
    assert ojs_jobs.drain() == []
    assert [r.job.state for r in ojs_jobs.drain(with_scheduled=True)] == ["completed"]


def test_inline_mode_runs_the_job_inside_enqueue(ojs_inline):
    job = handlers.welcome.enqueue("now@example.com")
    assert handlers.calls == [("tt.welcome", ["now@example.com"])]
    assert (job.state, job.result) == ("completed", {"sent_to": "now@example.com", "attempt": 1})
    ojs_inline.assert_performed("tt.welcome", args=["now@example.com"])


def test_inline_mode_raises_a_handlers_error_to_the_caller(ojs_inline):
    with pytest.raises(handlers.MailDown):
        handlers.flaky.enqueue(1)
    job = Job.objects.get(type="tt.flaky")
    assert (job.state, job.attempt) == ("retryable", 1)  # the failure is recorded; nothing retries it


def test_inline_mode_runs_scheduled_jobs_at_once_and_async_handlers(ojs_inline):
    job = handlers.welcome.enqueue("x@example.com", scheduled_at=dt.timedelta(days=1))
    assert job.state == "completed"
    job = django_ojs.enqueue("tt.async_fetch", [7])
    assert (job.state, job.result) == ("completed", {"n": 7, "async": True})


def test_inline_mode_inside_a_transaction(ojs_inline):
    with transaction.atomic():
        job = handlers.signup.enqueue("tx@example.com")
    assert job.state == "completed"
    ojs_inline.assert_completed("tt.welcome", args=["tx@example.com"])


def test_a_result_that_is_not_json_fails_the_attempt(ojs_jobs):
    django_ojs.enqueue("tt.bad_result", [])
    [ran] = ojs_jobs.drain()
    assert ran.failed and isinstance(ran.error, TypeError)
    job = Job.objects.get(type="tt.bad_result")
    assert job.state == "discarded" and "not JSON-serializable" in job.error["message"]


def test_without_a_context_the_helpers_say_so():
    with pytest.raises(RuntimeError, match=r"no django_ojs\.testing context"):
        testing.assert_enqueued("tt.welcome")


def test_drain_leaves_a_job_no_handler_can_run_waiting_as_the_worker_does(ojs_jobs):
    orphan = django_ojs.enqueue("nobody.handles.this", [1])
    handlers.welcome.enqueue("a@example.com")
    ran = ojs_jobs.drain()
    assert [r.job.type for r in ran] == ["tt.welcome"]
    orphan.refresh_from_db()
    assert (orphan.state, orphan.attempt) == ("available", 0)


def test_a_job_whose_handler_is_missing_when_it_runs_is_put_back_not_discarded(ojs_inline):
    with pytest.raises(LookupError):
        django_ojs.enqueue("nobody.handles.this", [1])
    job = Job.objects.get(type="nobody.handles.this")
    # Released: the attempt is not charged against max_attempts.
    assert (job.state, job.attempt - job.releases) == ("available", 0)
    assert JobError.objects.get(job=job).type == "HandlerNotFound"


def test_drain_parks_snoozes_and_waits_and_with_scheduled_runs_a_snoozed_job_not_a_waiting_one(ojs_jobs):
    snoozed, waiting = handlers.snooze_once.enqueue(), handlers.approval.enqueue()
    ran = ojs_jobs.drain()
    assert [(entry.job.id, entry.parked) for entry in ran] == [(snoozed.id, True), (waiting.id, True)]
    # The snooze's hour is skipped; the wait for a signal is not a time to skip: it stays parked.
    ran = ojs_jobs.drain(with_scheduled=True)
    assert [(entry.job.id, entry.result) for entry in ran] == [(snoozed.id, 1)]
    waiting.refresh_from_db()
    assert (waiting.state, waiting.waiting_for) == ("scheduled", "approved")
    django_ojs.signal(waiting.id, "approved", "yes")
    assert [entry.result for entry in ojs_jobs.drain()] == ["yes"]


@pytest.mark.parametrize("fail", [False, True], ids=["completed", "failed"])
def test_drain_writes_the_last_progress_report_a_handler_held_back(ojs_jobs, fail):
    # ctx.progress() writes at most once a second; the worker writes the report it held
    # back when the handler ends, and a test that drains must read what production reads.
    job = handlers.reports_twice.enqueue(fail)
    ojs_jobs.drain()
    job.refresh_from_db()
    assert job.state == ("discarded" if fail else "completed")
    assert (job.progress["data"], job.progress["message"]) == ({"phase": "load"}, "uploading")
    if fail:
        assert job.progress["progress"] == 0.5  # a failed attempt keeps its last report


def test_an_async_handlers_database_work_runs_in_the_tests_transaction(ojs_jobs):
    """drain() runs an async handler as Django runs async code from sync code (async_to_sync):
    its ORM calls and durable steps run in the test's thread, on its connection, so they see
    the rows of the test's transaction -- the job's own included -- on every engine."""
    handlers.welcome.enqueue("ada@example.com")
    django_ojs.enqueue("tt.async_session")
    ran = ojs_jobs.drain()
    [counted] = [run for run in ran if run.job.type == "tt.async_session"]
    assert counted.error is None and counted.result == {"welcome": 1, "step": "recorded", "in_the_tests_thread": True}
