"""How the runtime applies a heartbeat reply: it acts on the attempts the reply names.

A chaos run found a stale reply -- naming attempt 1 of a job, sent before
the worker's own FAIL and re-claim -- cancelling attempt 2 of the same job
on the same worker, which the store then kept active until the visibility
timeout (DESIGN invariant 12).
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from django_ojs.core.types import BeatReply, HeldJob, Lease
from django_ojs.handlers.context import JobContext
from django_ojs.protocol.states import WorkerState
from django_ojs.worker.execution import Execution
from django_ojs.worker.heartbeat import Heartbeat
from django_ojs.worker.runtime import Runtime, WorkerConfig

pytestmark = pytest.mark.django_db


def running(runtime: Runtime, job_id: uuid.UUID, attempt: int) -> Execution:
    """Put a running execution of (job, attempt) in the runtime's table, as _dispatch does."""
    job = SimpleNamespace(id=job_id, type="t.job", args=[], attempt=attempt, queue="default", meta={}, timeout=None)
    execution = Execution(job, JobContext(job, runtime.id, beat=lambda: None), Lease(runtime.id, attempt), None)
    runtime._table[(execution.job_id, attempt)] = execution
    runtime._undecided += 1
    return execution


@pytest.fixture
def runtime() -> Runtime:
    runtime = Runtime(WorkerConfig(queues=("default",), concurrency=4))
    runtime._heartbeat = Heartbeat(runtime.id, 5.0, lambda: (WorkerState.RUNNING, [], 0), lambda reply: None)
    return runtime


def reply(**lists: list[HeldJob]) -> BeatReply:
    return BeatReply(directive=WorkerState.RUNNING, server_time=None, **lists)


def test_a_reply_about_an_earlier_attempt_leaves_the_running_one_alone(runtime):
    job_id = uuid.uuid4()
    second = running(runtime, job_id, 2)
    runtime._on_reply(reply(jobs_lost=[HeldJob(str(job_id), 1)], jobs_cancelled=[HeldJob(str(job_id), 1)]))
    runtime._apply_replies()
    assert not second.released and not second.ctx.cancelled
    assert runtime._held_jobs() == [HeldJob(str(job_id), 2)]


def test_a_reply_about_the_running_attempt_releases_it(runtime):
    job_id = uuid.uuid4()
    first = running(runtime, job_id, 1)
    runtime._on_reply(reply(jobs_lost=[HeldJob(str(job_id), 1)]))
    runtime._apply_replies()
    assert first.released and first.ctx.cancelled
    assert runtime._held_jobs() == []
    assert runtime.stats.dropped == 1
