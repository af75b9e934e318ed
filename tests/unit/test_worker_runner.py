"""Running one job through its middleware and handler into an Outcome.

No job touches the database, but the runner checks the thread's connection
before and after each job (as Django does around a request), so the tests
may use it.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from django_ojs.core.types import Lease
from django_ojs.handlers.context import JobContext
from django_ojs.handlers.registry import HandlerRegistry
from django_ojs.worker import failures
from django_ojs.worker.execution import Execution, Runner

pytestmark = pytest.mark.django_db


def execution(job_type: str, *args) -> Execution:
    job = SimpleNamespace(id=uuid.uuid4(), type=job_type, args=list(args), attempt=2, queue="default", meta={})
    ctx = JobContext(job, "worker-1", beat=lambda: None)
    return Execution(job, ctx, Lease("worker-1", 2), deadline=None)


def registry_with(**handlers) -> HandlerRegistry:
    registry = HandlerRegistry()
    for job_type, func in handlers.items():
        registry.register(job_type.replace("_", "."), func)
    return registry


def test_the_handler_gets_the_context_and_the_args():
    runner = Runner(registry_with(math_add=lambda ctx, a, b: {"sum": a + b, "attempt": ctx.attempt}), [],
                    omit_backtraces=False)
    outcome = runner(execution("math.add", 2, 3))
    assert (outcome.result, outcome.failure) == ({"sum": 5, "attempt": 2}, None)


def test_exceptions_and_bad_results_become_failures():
    def boom(ctx):
        raise LookupError("no such user")

    runner = Runner(registry_with(a_boom=boom, a_bad=lambda ctx: object()), [], omit_backtraces=False)
    failure = runner(execution("a.boom")).failure
    assert (failure.type, failure.message, failure.details["error_class"]) == (
        "LookupError", "no such user", "builtins.LookupError")
    assert failure.backtrace[0].startswith("at boom (")
    assert runner(execution("a.bad")).failure.type == "InvalidResult"
    missing = runner(execution("a.missing")).failure
    # Put back for a worker that has the handler, never discarded (worker/failures.RELEASED).
    assert (missing.type, missing.retryable) == ("HandlerNotFound", True)
    assert missing.type in failures.RELEASED


def test_execution_middleware_wraps_the_handler():
    def tag(job, ctx, call_next):
        ctx.metadata["seen"] = job.type
        return {"wrapped": call_next(), "seen": ctx.metadata["seen"]}

    runner = Runner(registry_with(a_b=lambda ctx: 1), [tag], omit_backtraces=False)
    assert runner(execution("a.b")).result == {"wrapped": 1, "seen": "a.b"}
