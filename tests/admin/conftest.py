"""Fixtures of the admin tests: jobs in any state, made through the core, and staff users."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from django_ojs.core.types import WorkerInfo
from django_ojs.models import Job, Worker
from django_ojs.protocol.envelope import parse_job
from django_ojs.protocol.failure import Failure

TEST_WORKER = "worker-under-test"
CLAIMED_STATES = {"active", "completed", "retryable", "discarded"}


def build_job(
    state: str = "available",
    *,
    type: str = "email.send",
    queue: str = "default",
    args: list[Any] | None = None,
    meta: dict[str, Any] | None = None,
    priority: int = 0,
    failures: int = 1,
    backtrace: list[str] | None = None,
) -> Job:
    """A job brought to ``state`` by the core's own moves.

    A claimed state (active, completed, retryable, discarded) is reached by
    FETCH from ``queue``, which must hold no other available job; a
    discarded job failed ``failures`` times, each failure in its history,
    the last one not retryable.
    """
    options: dict[str, Any] = {"queue": queue}
    if state == "pending":
        options["pending"] = True
    if state == "scheduled":
        options["scheduled_at"] = "2099-01-01T00:00:00Z"
    body = {"type": type, "args": args or [], "meta": meta or {}, "priority": priority, "options": options}
    job = Job.objects.push(parse_job(body))
    if state == "cancelled":
        Job.objects.cancel(job.id)
    if state in CLAIMED_STATES:
        _claim(job, queue)
    if state == "completed":
        Job.objects.ack(job.id, result={"sent": True})
    if state == "retryable":
        Job.objects.fail(job.id, _failure(1, backtrace))
    if state == "discarded":
        # Earlier attempts are released back at once (the test's transaction
        # holds the database clock still, so a retry backoff would never end);
        # each still leaves its error in the history. The last one gives up.
        for attempt in range(1, failures):
            Job.objects.fail(job.id, _failure(attempt, backtrace), requeue=True)
            _claim(job, queue)
        Job.objects.fail(job.id, _failure(failures, backtrace, retryable=False))
    job.refresh_from_db()
    assert job.state == state, f"setup reached {job.state}, not {state}"
    return job


def _failure(attempt: int, backtrace: list[str] | None, retryable: bool = True) -> Failure:
    frames = backtrace if backtrace is not None else [f'File "mail.py", line {n}, in send' for n in (10, 20)]
    return Failure(
        type="ConnectionError",
        message=f"connection refused to smtp:25 (attempt {attempt})",
        backtrace=frames,
        retryable=retryable,
    )


def _claim(job: Job, queue: str) -> None:
    claimed = Job.objects.fetch([queue], worker_id=TEST_WORKER)
    assert [c.id for c in claimed] == [job.id], f"queue {queue!r} held another available job"


@pytest.fixture
def make_job(db) -> Callable[..., Job]:
    return build_job


@pytest.fixture
def make_worker(db) -> Callable[..., Worker]:
    def register(worker_id: str = "worker-1", *, hostname: str = "web-1", queues: list[str] | None = None) -> Worker:
        return Worker.objects.register(
            worker_id, WorkerInfo(hostname=hostname, pid=4242, queues=queues or ["default"], concurrency=5)
        )

    return register


def staff_with(codenames: list[str], username: str = "operator") -> User:
    """A staff user holding exactly these django_ojs permissions."""
    user = User.objects.create_user(username, password="secret", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_ojs", codename__in=codenames)
    )
    return user


VIEW_ONLY = [
    "view_job", "view_deadletterjob", "view_worker", "view_queue", "view_apikey", "view_overview",
]


@pytest.fixture
def viewer_client(db, client):
    """A client logged in as staff with view permission on every page, and nothing more."""
    client.force_login(staff_with(VIEW_ONLY, "viewer"))
    return client
