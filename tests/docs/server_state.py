"""What the HTTP reference's hidden preludes set up on the server's database before a request.

A response block's prelude (tests/docs/exchanges.py) runs in the test process,
which shares its database with the server under test:

    <!-- sample: response status=200
    from tests.docs.server_state import *
    ID = dead_letter_job()
    -->

Each helper makes a job or a schedule through the core, as a producer, a
worker or an operator would, and returns its id or name as a string.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django_ojs.canvas import chain, signature
from django_ojs.core.clock import db_now
from django_ojs.core.durable import record_step
from django_ojs.core.history import MINUTE, TRANSITIONS, minute_floor
from django_ojs.core.maintenance import promote_due
from django_ojs.core.progress import report_progress
from django_ojs.core.types import Lease, WorkerInfo
from django_ojs.models import ApiKey, Job, StatsBucket, Worker
from django_ojs.protocol.durations import parse_timestamp
from django_ojs.protocol.envelope import parse_job
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.progress import Report, make
from tests.helpers import history_running_since

__all__ = [
    "active_job", "api_key", "busy_history", "complete_next", "dead_letter_job", "discarded_job", "finished_at",
    "parked_job", "push", "report_on_next", "retried_job", "running_workflow", "silent_worker", "worker",
]

# The worker the reference's FETCH, ACK and heartbeat examples name.
WORKER = "worker-1"


def push(job_type: str = "email.send", args: list[Any] | None = None, **options: Any) -> str:
    """An available job (or scheduled, pending... by its options); its id."""
    body = {"type": job_type, "args": args if args is not None else ["ada@example.com", "Welcome"], "options": options}
    return str(Job.objects.push(parse_job(body)).id)


def active_job(job_type: str = "email.send", queue: str = "email", worker_id: str = WORKER, **options: Any) -> str:
    """A job claimed by ``worker_id`` (attempt 1) from ``queue``, which must hold no other available job; its id."""
    job_id = push(job_type, queue=queue, **options)
    claimed = Job.objects.fetch([queue], worker_id=worker_id)
    assert [str(job.id) for job in claimed] == [job_id], f"queue {queue} held another job: name a queue of its own"
    return job_id


def dead_letter_job(job_type: str = "email.send", queue: str = "email") -> str:
    """A job whose one attempt failed with ConnectionError: discarded, in the dead letter; its id."""
    job_id = active_job(job_type, queue, retry={"max_attempts": 1, "on_exhaustion": "dead_letter"})
    Job.objects.fail(job_id, Failure(type="ConnectionError", message="connection refused to smtp:25", retryable=True))
    return job_id


def discarded_job(job_type: str = "thumbnail.make", queue: str = "images") -> str:
    """A job whose one attempt failed under a policy that says ``on_exhaustion: "discard"``: a plain discard,
    not in the dead letter; its id."""
    job_id = active_job(job_type, queue, retry={"max_attempts": 1, "on_exhaustion": "discard"})
    Job.objects.fail(job_id, Failure(type="ValueError", message="not an image", retryable=True))
    return job_id


def complete_next(queue: str = "default", result: Any = None) -> str:
    """Claim the next job of ``queue`` and complete it with ``result``, as a worker would; its id."""
    [claimed] = Job.objects.fetch([queue], worker_id=WORKER)
    Job.objects.ack(claimed.id, result=result)
    return str(claimed.id)


def report_on_next(queue: str = "default", progress: float | None = None, data: dict[str, Any] | None = None,
                   message: str | None = None) -> str:
    """Claim the next job of ``queue`` and report its progress, as a worker would; its id."""
    [claimed] = Job.objects.fetch([queue], worker_id=WORKER)
    assert report_progress(claimed.id, Report(progress, data, message), attempt=claimed.attempt, worker_id=WORKER)
    return str(claimed.id)


def parked_job(signal: str, job_type: str = "order.ship", queue: str = "orders", timeout: float = 86400) -> str:
    """A job whose handler waits for ``signal``: parked (scheduled) until it comes or ``timeout`` seconds pass; its id."""
    job_id = active_job(job_type, queue)
    Job.objects.wait(job_id, signal, dt.timedelta(seconds=timeout), lease=Lease(WORKER, 1))
    return job_id


def running_workflow(*job_types: str, queue: str = "default") -> str:
    """A chain of jobs of ``job_types``, its first step claimed by a worker; the workflow's id."""
    workflow = chain(*(signature(job_type, [], queue=queue) for job_type in job_types)).enqueue()
    Job.objects.fetch([queue], worker_id=WORKER)
    return str(workflow.id)
def api_key(*scopes: str) -> str:
    """A new API key holding ``scopes``; its secret, for the ``Authorization`` header."""
    return ApiKey.objects.issue("docs " + "+".join(scopes), list(scopes))[1]


def worker(worker_id: str, *, hostname: str = "web-1", pid: int = 4242, queues: tuple[str, ...] = ("default", "email"),
           concurrency: int = 10) -> str:
    """A live worker, registered as a worker process registers itself; its id."""
    info = WorkerInfo(hostname=hostname, pid=pid, queues=list(queues), concurrency=concurrency)
    return str(Worker.objects.register(worker_id, info).id)


def silent_worker(worker_id: str, *, minutes: int = 10, **info: Any) -> str:
    """A worker whose last heartbeat was ``minutes`` ago, past any ``HEARTBEAT_TIMEOUT``: dead; its id."""
    worker(worker_id, **info)
    Worker.objects.filter(pk=worker_id).update(last_heartbeat_at=db_now() - dt.timedelta(minutes=minutes))
    return worker_id


def finished_at(job_id: str, when: str) -> str:
    """Set a finished job's end back to ``when`` (RFC 3339), as if it had finished then; its id."""
    Job.objects.filter(id=job_id).update(finished_at=parse_timestamp(when, allow_relative=False))
    return job_id


def busy_history(queue: str = "email", *, minutes: int = 60) -> None:
    """A reaper running for two days that has counted the last ``minutes`` minutes of ``queue``,
    a steady load in each (every transition a different figure); the minutes since are counted live."""
    now = minute_floor(db_now())
    counted_through = now - dt.timedelta(minutes=2)
    history_running_since(now - dt.timedelta(days=2), counted_through=counted_through)
    per_minute = {"enqueued": 18, "completed": 17, "discarded": 1, "retried": 2, "cancelled": 0}
    assert set(per_minute) == set(TRANSITIONS)
    StatsBucket.objects.bulk_create(
        StatsBucket(span=MINUTE, start=counted_through - dt.timedelta(minutes=index), queue=queue,
                    transition=transition, count=count)
        for index in range(1, minutes + 1) for transition, count in per_minute.items() if count
    )
def retried_job(job_type: str, queue: str, checkpoint: dict[str, Any], steps: dict[str, Any]) -> str:
    """A durable job whose first attempt checkpointed, recorded ``steps`` (name: result) and failed;
    due again in ``queue`` (which must hold no other job), for a worker to FETCH its retry; its id."""
    job_id = active_job(job_type, queue, retry={"max_attempts": 3, "initial_interval": "PT1S"})
    assert report_progress(job_id, make(checkpoint=checkpoint), attempt=1, worker_id=WORKER)
    for name, result in steps.items():
        record_step(job_id, name, result, attempt=1, worker_id=WORKER)
    Job.objects.fail(job_id, Failure(type="ConnectionError", message="carrier API unreachable", retryable=True))
    Job.objects.filter(id=job_id).update(run_at="2000-01-01T00:00:00Z")
    promote_due(10)
    return job_id
