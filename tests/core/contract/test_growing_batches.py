"""Growing a running batch or group (``core.workflows.add_jobs``): added jobs count like the others.

The callbacks fire once, after every job -- added ones included -- ended;
adding once they fired is refused. On PostgreSQL the last original job
ending while jobs are added is raced with real concurrent transactions, in
both orders: whoever takes the workflow's row first decides, and the
callback fires neither early nor twice.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from django.db import connections, transaction

from django_ojs.core import workflows as store
from django_ojs.models import Event, Job, Workflow, WorkflowNode
from django_ojs.protocol.errors import InvalidRequest, InvalidTransition
from tests.waiting import wait_until

from .test_workflows import ack, create, fail, job, nodes, state, take, workflow_events


def grow(workflow: Workflow, *kinds: str, into: str = "") -> list[Job]:
    return store.add_jobs(workflow.id, {"jobs": [job(kind) for kind in kinds]}, into=into)[1]


def batch(*kinds: str, **callbacks: Any) -> Workflow:
    return create({"type": "batch", "jobs": [job(kind) for kind in kinds],
                   "callbacks": callbacks or {"on_complete": job("report", queue="cb")}})


def test_added_jobs_run_and_the_callback_waits_for_them_and_sees_their_results(db):
    workflow = batch("a", "b")
    [first, second] = take(count=2)
    added = grow(workflow, "c")
    assert [(job.type, job.extra["workflow_step"]) for job in added] == [("c", "2")]
    ack(first, 1)
    ack(second, 2)
    assert nodes(workflow)["on_complete"] == "waiting"  # c is still running
    [third] = take()
    assert third.id == added[0].id
    ack(third, 3)
    [callback] = take("cb")
    assert callback.extra["parent_results"] == [1, 2, 3]
    ack(callback)
    assert state(workflow) == "completed"
    assert workflow_events(workflow).count("workflow.job_added") == 1


def test_a_batch_fails_by_an_added_job_as_by_its_own(db):
    workflow = batch("a", on_success=job("yes", queue="cb"), on_failure=job("no", queue="cb"))
    store.add_jobs(workflow.id, {"jobs": [job("b", retry={"max_attempts": 1})]})
    first, second = take(count=2)
    ack(first)
    fail(second)
    [callback] = take("cb")
    assert callback.type == "no"
    assert nodes(workflow)["on_success"] == "skipped"


def test_adding_after_the_callbacks_fired_is_refused_and_changes_nothing(db):
    workflow = batch("a")
    ack(take()[0])
    before = nodes(workflow)
    with pytest.raises(InvalidTransition, match="callbacks have fired"):
        grow(workflow, "late")
    assert nodes(workflow) == before
    assert not Job.objects.filter(type="late").exists()


def test_a_group_grows_and_a_chain_does_not(db):
    group = create({"type": "group", "jobs": [job("a")]})
    grow(group, "b")
    assert sorted(nodes(group)) == ["", "0", "1"]
    chain = create({"type": "chain", "steps": [job("x"), job("y")]})
    with pytest.raises(InvalidRequest, match="no batch or group"):
        grow(chain, "z")
    nested = create({"type": "chain", "steps": [job("first"), {"type": "group", "jobs": [job("y")]}]})
    ack(next(claimed for claimed in take(count=10) if claimed.type == "first"))  # the group starts
    grow(nested, "y2", into="1")
    assert nodes(nested)["1.1"] == "pending"


def test_an_ended_workflow_a_bad_job_and_too_many_jobs_are_refused(db, ojs):
    workflow = batch("a")
    with pytest.raises(InvalidRequest, match="jobs must be a non-empty array"):
        store.add_jobs(workflow.id, {"jobs": []})
    with pytest.raises(InvalidRequest, match="validation failed"):
        store.add_jobs(workflow.id, {"jobs": [{"type": "a", "args": "not a list"}]})
    ojs(MAX_BATCH_SIZE=2)
    with pytest.raises(InvalidRequest, match="room for 0 more"):
        grow(workflow, "b", "c")
    assert sorted(nodes(workflow)) == ["", "0", "on_complete"]


# -- the race, with real concurrent transactions ------------------------------------


def _in_lock_wait(observer: psycopg.Connection) -> bool:
    return observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
    ).fetchone()[0] > 0


def _observer() -> psycopg.Connection:
    db = connections["default"].settings_dict
    return psycopg.connect(dbname=db["NAME"], host=db["HOST"] or None, port=db["PORT"] or None,
                           user=db["USER"] or None, password=db["PASSWORD"] or None, autocommit=True)


def _holding(move, started: threading.Event, release: threading.Event, outcome: list) -> threading.Thread:
    """``move()`` in a thread, inside a transaction it keeps open until ``release`` is set."""

    def run() -> None:
        try:
            with transaction.atomic():
                outcome.append(move())
                started.set()
                release.wait(120)
        except Exception as exc:
            outcome.append(exc)
            started.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _blocked(move, outcome: list) -> threading.Thread:
    def run() -> None:
        try:
            outcome.append(move())
        except Exception as exc:
            outcome.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.postgres
def test_the_last_job_settling_first_fires_once_and_the_add_waiting_on_it_is_refused(transactional_db):
    workflow = batch("a")
    [last] = take()
    started, release, settled, added = threading.Event(), threading.Event(), [], []
    observer = _observer()
    try:
        settling = _holding(lambda: ack(last, 1), started, release, settled)
        started.wait(120)
        adding = _blocked(lambda: grow(workflow, "late"), added)
        wait_until(lambda: _in_lock_wait(observer), 60, "the add to wait for the settling transaction")
        release.set()
        settling.join(120)
        adding.join(120)
    finally:
        release.set()
        observer.close()
    assert isinstance(added[0], InvalidTransition), added
    assert Job.objects.filter(type="report").count() == 1
    assert not Job.objects.filter(type="late").exists()
    assert Event.objects.filter(type="workflow.callback_fired").count() == 1


@pytest.mark.postgres
def test_an_add_first_holds_the_callback_back_until_the_added_job_ends(transactional_db):
    workflow = batch("a")
    [last] = take()
    started, release, added, settled = threading.Event(), threading.Event(), [], []
    observer = _observer()
    try:
        adding = _holding(lambda: grow(workflow, "late"), started, release, added)
        started.wait(120)
        settling = _blocked(lambda: ack(last, 1), settled)
        wait_until(lambda: _in_lock_wait(observer), 60, "the settling transaction to wait for the add")
        release.set()
        adding.join(120)
        settling.join(120)
    finally:
        release.set()
        observer.close()
    assert not isinstance(added[0], Exception), added
    assert Job.objects.get(id=last.id).state == "completed"
    assert not Job.objects.filter(type="report").exists()  # not early
    [late] = take()
    assert late.type == "late"
    ack(late, 2)
    [callback] = take("cb")
    assert callback.extra["parent_results"] == [1, 2]
    assert Job.objects.filter(type="report").count() == 1
    assert WorkflowNode.objects.get(workflow=workflow, path="on_complete").state == "pending"
