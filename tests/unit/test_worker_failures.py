"""Exceptions turned into FAIL errors, and the pure helpers of the worker (no database)."""

from __future__ import annotations

import datetime as dt

import pytest

from django_ojs.handlers.options import job_body
from django_ojs.protocol.errors import InvalidRequest
from django_ojs.protocol.failure import MAX_BACKTRACE_CHARS, MAX_BACKTRACE_FRAMES
from django_ojs.worker import failures
from django_ojs.worker.signals import pid1_problem
from django_ojs.worker.waker import Waker


def outer():
    inner()


def inner():
    raise ConnectionError("smtp refused")


def raised(func) -> BaseException:
    try:
        func()
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def test_an_exception_becomes_type_message_and_innermost_first_backtrace():
    failure = failures.failure_from_exception(raised(outer))
    assert (failure.type, failure.message) == ("ConnectionError", "smtp refused")
    assert failure.backtrace[0].startswith("at inner (") and failure.backtrace[1].startswith("at outer (")
    assert failure.backtrace[0].endswith(f"{__file__}:{inner.__code__.co_firstlineno + 1})")
    assert failure.retryable is None  # the retry policy decides


def test_backtraces_are_capped_and_can_be_omitted():
    def deep(n):
        if n == 0:
            raise RecursionError("deep")
        deep(n - 1)

    failure = failures.failure_from_exception(raised(lambda: deep(200)))
    assert len(failure.backtrace) == MAX_BACKTRACE_FRAMES
    assert failure.backtrace[0].startswith("at deep (")  # the innermost frames are the ones kept
    assert sum(map(len, failure.backtrace)) <= MAX_BACKTRACE_CHARS
    assert failures.failure_from_exception(raised(outer), omit_backtrace=True).backtrace == []


def test_an_exception_without_text_is_named_by_its_repr():
    assert failures.failure_from_exception(raised(lambda: (_ for _ in ()).throw(KeyError()))).message == "KeyError()"


def test_runtime_failures():
    assert failures.no_handler("a.b", []).retryable is True and failures.NO_HANDLER in failures.RELEASED
    assert failures.shutdown("bye").type == "ShutdownError" and failures.shutdown("bye").retryable is True
    assert failures.timed_out(1.5).type == "timeout"


def test_python_option_values_become_envelope_values():
    when = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    spec = job_body("a.b", [1], {"timeout": dt.timedelta(minutes=2), "scheduled_at": when, "meta": {"k": 1}})
    assert spec.timeout == dt.timedelta(minutes=2)
    assert spec.scheduled_at == when and spec.meta == {"k": 1}
    with pytest.raises(InvalidRequest, match="timezone-aware"):
        job_body("a.b", [], {"scheduled_at": dt.datetime(2030, 1, 1)})
    with pytest.raises(InvalidRequest, match="args must be a list"):
        job_body("a.b", "not a list", {})


def test_pid1_problem_only_for_a_shell_above_us_in_a_container():
    assert pid1_problem(pid=7, in_container=True, pid1_command="sh")
    assert not pid1_problem(pid=1, in_container=True, pid1_command="python")
    assert not pid1_problem(pid=7, in_container=True, pid1_command="tini")
    assert not pid1_problem(pid=7, in_container=False, pid1_command="bash")


def test_waker_wakes_a_waiting_loop_and_coalesces():
    import threading
    import time

    waker = Waker()
    threading.Timer(0.05, waker.wake).start()
    started = time.monotonic()
    waker.wait(120)
    assert time.monotonic() - started < 60  # woken, not timed out
    for _ in range(1000):
        waker.wake()  # one byte written, not a thousand
    waker.wait(0)
    started = time.monotonic()
    waker.wait(0.05)  # nothing pending any more: it sleeps
    assert time.monotonic() - started >= 0.04
    waker.close()


def test_worker_settings_are_checked(settings):
    from django_ojs.worker.runtime import WorkerConfig

    assert WorkerConfig.from_settings(concurrency=3, queues=("a", "b")).queues == ("a", "b")
    for bad in ({"concurrency": 0}, {"heartbeat_interval": 0}, {"grace_period": -1}, {"queues": ()}):
        with pytest.raises(ValueError):
            WorkerConfig.from_settings(**bad)
