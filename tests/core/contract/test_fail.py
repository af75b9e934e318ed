"""FAIL through the core: Job.objects.fail and the retry policy (ojs-core §7.4, ojs-retry)."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from django.db import transaction

from django_ojs.core.types import Lease
from django_ojs.models import Job, JobError
from django_ojs.protocol.durations import format_timestamp
from django_ojs.protocol.errors import InvalidTransition
from django_ojs.protocol.failure import Failure
from tests.helpers import history, reload, row, update

NO_JITTER = {"jitter": False, "initial_interval": "PT10S", "backoff_coefficient": 2.0}


def fail(job, type_="HandlerError", **kwargs):
    lease = kwargs.pop("lease", Lease())
    requeue = kwargs.pop("requeue", False)
    kwargs.setdefault("message", f"{type_} happened")
    return Job.objects.fail(job.id, Failure(type=type_, **kwargs), lease=lease, requeue=requeue)


def retry_now(job, worker_id="w1"):
    """Let the backoff elapse and claim the job again."""
    update(job, run_at=job.run_at - dt.timedelta(days=1))
    assert Job.objects.promote_due(10) == 1
    [again] = Job.objects.fetch([job.queue], worker_id=worker_id)
    return again


def last_error_time(job):
    return JobError.objects.filter(job_id=job.pk).latest("id").occurred_at


def test_a_failure_with_attempts_left_is_retryable_after_the_backoff(claim):
    job = claim("w1", options={"retry": {**NO_JITTER, "max_attempts": 3}})
    failed = fail(job, "SmtpError", message="refused", backtrace=["at send"])
    stored = reload(job)
    assert stored.state == "retryable"
    assert stored.retry_delay_ms == 10_000
    assert stored.run_at == last_error_time(job) + dt.timedelta(seconds=10)
    assert stored.error["type"] == "SmtpError" and stored.error["message"] == "refused"
    assert stored.error["attempt"] == 1 and stored.error["backtrace"] == ["at send"]
    assert (stored.worker_id, stored.lease_expires_at, stored.deadline_at, stored.completed_at) == (None,) * 4
    assert (failed.state, failed.run_at) == (stored.state, stored.run_at)


def test_the_backoff_grows_with_each_attempt(claim):
    job = claim("w1", options={"retry": {**NO_JITTER, "max_attempts": 4}})
    delays = []
    for _ in range(3):
        fail(job)
        delays.append(reload(job).retry_delay_ms)
        if len(delays) < 3:
            job = retry_now(reload(job))
    assert delays == [10_000, 20_000, 40_000]


def test_the_backoff_with_jitter_stays_within_half_and_one_and_a_half_times(claim):
    job = claim(options={"retry": {"initial_interval": "PT10S", "jitter": True}})
    fail(job)
    assert 5_000 <= reload(job).retry_delay_ms < 15_000


def test_a_failure_on_the_last_attempt_discards_the_job(claim):
    job = claim(options={"retry": {"max_attempts": 1}})
    fail(job, "Fatal")
    stored = reload(job)
    assert (stored.state, stored.dead_letter, stored.run_at) == ("discarded", False, None)
    assert stored.completed_at == stored.finished_at is not None
    assert stored.error["type"] == "Fatal"


def test_exhaustion_goes_to_the_dead_letter_when_the_policy_says_so(claim):
    job = claim(options={"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}})
    fail(job)
    assert (reload(job).state, reload(job).dead_letter) == ("discarded", True)


def test_every_attempt_up_to_max_attempts_runs(claim):
    job = claim(options={"retry": {**NO_JITTER, "max_attempts": 3}})
    states = []
    for _ in range(3):
        fail(job)
        job = reload(job)
        states.append(job.state)
        if job.state == "retryable":
            job = retry_now(job)
    assert states == ["retryable", "retryable", "discarded"]
    assert job.attempt == 3


@pytest.mark.parametrize(
    ("patterns", "error_type", "discarded"),
    [
        (["ValidationError"], "ValidationError", True),
        (["ValidationError"], "ValidationErrorX", False),
        (["auth.*"], "auth.token_expired", True),
        (["auth.*"], "auth.token.revoked", True),
        (["auth.*"], "auth", False),
        (["auth.*"], "authz.denied", False),
        (["validation.*", "Fatal"], "Fatal", True),
        (["validation.*"], "Validation.x", False),
    ],
)
def test_non_retryable_error_types_discard_at_once(claim, patterns, error_type, discarded):
    job = claim(options={"retry": {"max_attempts": 5, "non_retryable_errors": patterns}})
    fail(job, error_type)
    assert reload(job).state == ("discarded" if discarded else "retryable")


def test_non_retryable_patterns_also_match_the_code_and_the_error_class(claim):
    by_code = claim(options={"retry": {"max_attempts": 5, "non_retryable_errors": ["payment.*"]}})
    Job.objects.fail(by_code.id, Failure(type="Exception", code="payment.declined", message=""))
    by_class = claim(options={"retry": {"max_attempts": 5, "non_retryable_errors": ["FatalError"]}})
    Job.objects.fail(by_class.id, Failure(type="handler_error", message="", details={"error_class": "FatalError"}))
    assert [reload(by_code).state, reload(by_class).state] == ["discarded", "discarded"]


def test_a_non_retryable_error_follows_on_exhaustion(claim):
    job = claim(options={"retry": {"max_attempts": 5, "non_retryable_errors": ["Fatal"],
                                   "on_exhaustion": "dead_letter"}})
    fail(job, "Fatal")
    assert (reload(job).state, reload(job).dead_letter) == ("discarded", True)


def test_retryable_false_discards_with_attempts_left(claim):
    job = claim(options={"retry": {"max_attempts": 5}})
    fail(job, retryable=False)
    assert reload(job).state == "discarded"


def test_retryable_true_does_not_extend_the_attempts(claim):
    job = claim(options={"retry": {"max_attempts": 1}})
    fail(job, retryable=True)
    assert reload(job).state == "discarded"


@pytest.mark.parametrize(("code", "dead_letter"), [("DISCARD", False), ("FAIL", False), ("DEAD_LETTER", True)])
def test_handler_codes_end_the_job_whatever_the_policy(claim, code, dead_letter):
    job = claim(options={"retry": {"max_attempts": 5, "on_exhaustion": "dead_letter" if not dead_letter else "discard"}})
    Job.objects.fail(job.id, Failure(type="E", code=code, message=""))
    assert (reload(job).state, reload(job).dead_letter) == ("discarded", dead_letter)


def test_handler_code_retry_follows_the_policy(claim):
    job = claim(options={"retry": {"max_attempts": 2}})
    Job.objects.fail(job.id, Failure(type="E", code="RETRY", message=""))
    assert reload(job).state == "retryable"


def test_a_release_returns_the_job_at_once_without_charging_an_attempt(claim):
    job = claim("w1", options={"retry": {"max_attempts": 1}})
    fail(job, "shutdown", retryable=False, requeue=True)
    stored = reload(job)
    assert (stored.state, stored.attempt, stored.releases, stored.worker_id, stored.started_at) == (
        "available", 1, 1, None, None)
    assert stored.enqueued_at is not None and stored.run_at is None
    assert stored.error["type"] == "shutdown"
    # The one allowed attempt is still there: the next failure is the one that counts.
    [again] = Job.objects.fetch([job.queue], worker_id="w2")
    assert again.attempt == 2
    fail(again)
    assert reload(job).state == "discarded"


# Logged once the transaction commits: the test commits.
@pytest.mark.django_db(transaction=True)
def test_past_a_release_the_log_says_the_attempts_charged_beside_the_attempt(claim, caplog):
    """A release charges no attempt: "attempt 2/1 failed" would read as a broken policy."""
    caplog.set_level(logging.INFO, logger="django_ojs.jobs")
    job = claim("w1", options={"retry": {"max_attempts": 1, "on_exhaustion": "discard"}})
    fail(job, "shutdown", message="worker stopping", retryable=False, requeue=True)
    [again] = Job.objects.fetch([job.queue], worker_id="w2")
    fail(again, "ValueError", message="bad row 7")
    # The release is no failure of the job's: logged as what it is, in the worker summary's word.
    [(_, released), (_, line)] = fate_lines(caplog)
    assert released == (f"job {job.id} (test.job) attempt 1 released: shutdown: worker stopping; "
                        "back in its queue now, the attempt not charged")
    assert line.startswith(f"job {job.id} (test.job) attempt 2 (1/1 charged) failed: ValueError: bad row 7; ")


def test_each_failure_is_one_history_row_with_its_attempt_number(claim):
    job = claim("w1", options={"retry": {**NO_JITTER, "max_attempts": 3}})
    fail(job, "First")
    job = retry_now(reload(job))
    fail(job, "Second", requeue=True)
    [job] = Job.objects.fetch([job.queue], worker_id="w1")
    fail(job, "Third")
    assert history(job) == [(1, "First"), (2, "Second"), (3, "Third")]
    entry = JobError.objects.filter(job_id=job.pk).latest("id")
    assert (entry.message, entry.retryable) == ("Third happened", None)


def test_another_workers_failure_report_is_refused_and_the_job_stays_active(claim):
    job = claim("owner")
    before = row(job)
    with pytest.raises(InvalidTransition) as raised:
        fail(job, lease=Lease(worker_id="intruder"))
    assert raised.value.current_state == "active"
    assert row(job) == before
    assert not JobError.objects.exists()


def test_a_failure_report_for_an_older_attempt_is_refused(claim):
    job = claim("w1")
    with pytest.raises(InvalidTransition):
        fail(job, lease=Lease(worker_id="w1", attempt=job.attempt - 1))
    assert reload(job).state == "active"


def fate_lines(caplog) -> list[tuple[int, str]]:
    return [(record.levelno, record.getMessage()) for record in caplog.records if record.name == "django_ojs.jobs"]


# Logged once the transaction commits: the test commits.
@pytest.mark.django_db(transaction=True)
def test_every_failed_attempt_logs_one_line_and_the_last_says_it_ended_the_job(claim, caplog):
    """INFO with when the retry is while attempts are left; one WARNING, with what the job is kept as, for the last."""
    caplog.set_level(logging.INFO, logger="django_ojs.jobs")
    job = claim("w1", options={"retry": {**NO_JITTER, "max_attempts": 2, "on_exhaustion": "dead_letter"}})
    retrying = fail(job, "ValueError", message="bad row 7")
    assert fate_lines(caplog) == [(logging.INFO, f"job {job.id} (test.job) attempt 1/2 failed: ValueError: bad row 7; "
                                                 f"retry at {format_timestamp(retrying.run_at)}")]
    caplog.clear()
    discarded = fail(retry_now(retrying), "ValueError", message="bad row 7")
    assert fate_lines(caplog) == [(logging.WARNING, f"job {job.id} (test.job) attempt 2/2 failed: ValueError: bad row 7; "
                                                    f"exhausted → dead letter, kept until "
                                                    f"{format_timestamp(discarded.kept_until)}")]


# Logged once the transaction commits: the test commits.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("failure", "why"), [
    ({"type_": "ValueError", "retryable": False}, "not retryable (the failure said so)"),
    ({"type_": "ValueError", "code": "DISCARD"}, "the handler said DISCARD"),
])
def test_a_failure_that_ends_the_job_early_says_why_and_what_it_is_kept_as(claim, caplog, failure, why):
    caplog.set_level(logging.INFO, logger="django_ojs.jobs")
    job = claim("w1", options={"retry": {"max_attempts": 5, "on_exhaustion": "discard"}})
    discarded = fail(job, **failure)
    [(level, line)] = fate_lines(caplog)
    assert level == logging.WARNING and line.startswith(f"job {job.id} (test.job) attempt 1/5 failed: ValueError: ")
    assert line.endswith(f"; {why} → discarded, kept until {format_timestamp(discarded.kept_until)}")


# Logged once the transaction commits: the test commits.
@pytest.mark.django_db(transaction=True)
def test_a_long_message_is_cut_in_the_log_line_and_kept_whole_on_the_job(claim, caplog):
    """A message of kilobytes (a response body) makes a log line of at most 500 of its characters,
    saying how long it was; the job's error keeps all of it."""
    caplog.set_level(logging.INFO, logger="django_ojs.jobs")
    job = claim("w1", options={"retry": {**NO_JITTER, "max_attempts": 2}})
    message = "upstream said: " + "x" * 5000
    retrying = fail(job, "ValueError", message=message)
    [(_, line)] = fate_lines(caplog)
    assert f"failed: ValueError: {message[:500]}… (5,015 characters; the whole message is in the job's errors); retry at" in line
    assert len(line) < 700
    assert reload(retrying).error["message"] == message


# Logged once the transaction commits: the test commits.
@pytest.mark.django_db(transaction=True)
def test_an_error_cannot_write_lines_of_its_own_into_the_log(claim, caplog):
    """A worker's error type and message are the client's text: their line breaks and bidi controls
    are written escaped, so the failure stays one line and cannot forge another; the job keeps them as sent."""
    caplog.set_level(logging.INFO, logger="django_ojs.jobs")
    job = claim("w1", options={"retry": {**NO_JITTER, "max_attempts": 2}})
    message = "oops\n2026-11-28 04:00:00,000 CRITICAL django_ojs.reaper: forged\r\u2028\u202egnp.exe"
    retrying = fail(job, "Boom\nFake", message=message)
    [(_, line)] = fate_lines(caplog)
    assert not set(line) & {"\n", "\r", "\u2028", "\u202e"}
    assert ("failed: Boom\\nFake: oops\\n2026-11-28 04:00:00,000 CRITICAL django_ojs.reaper: forged"
            "\\r\\u2028\\u202egnp.exe; retry at") in line
    assert reload(retrying).error["message"] == message


# Logged once the transaction commits: the test commits.
@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_failure_logs_nothing(claim, caplog):
    caplog.set_level(logging.INFO, logger="django_ojs.jobs")
    job = claim("w1")
    with pytest.raises(RuntimeError), transaction.atomic():
        fail(job)
        raise RuntimeError("the caller's transaction rolls back")
    assert fate_lines(caplog) == [] and reload(job).state == "active"
