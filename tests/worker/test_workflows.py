"""Workflows run by real worker processes, and a worker SIGKILLed between steps.

A step's outcome and the workflow's next move commit together, so a worker
killed at any point leaves either the step still active (the reaper
recovers it, another worker runs it) or the next step already enqueued:
the workflow always finishes, each callback fired once.
"""

from __future__ import annotations

import signal

import pytest

import django_ojs
from django_ojs.models import Job, Workflow, WorkflowNode

from .conftest import PATIENCE, wait_until
from .probe.jobs import collect, record
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FAST_DEATH = {"OJS_HEARTBEAT_TIMEOUT": "2"}


def finished(workflow: Workflow) -> str:
    return Workflow.objects.get(id=workflow.id).state


def test_a_worker_runs_a_composed_workflow_and_each_step_sees_the_results_before_it(worker):
    worker("--concurrency", "4")
    workflow = (collect.s("a") | django_ojs.group(collect.s("b"), collect.s("c")) | collect.s("d")).enqueue(
        name="pipeline"
    )
    wait_until(lambda: finished(workflow) == "completed", PATIENCE, "the workflow to complete")
    last = WorkflowNode.objects.get(workflow=workflow, path="2")
    first = {"value": "a", "seen": []}
    fanned = [{"value": "b", "seen": [first]}, {"value": "c", "seen": [first]}]
    assert last.result == {"value": "d", "seen": [first, fanned]}


def test_sigkill_between_chain_steps_and_the_reaper_finishes_the_workflow(worker, reaper):
    doomed = worker(env=FAST_DEATH)
    # Step 1 hangs on its first attempt: the worker dies holding it, after step 0 committed.
    workflow = django_ojs.chain(record.s(0), record.s(0, 3600), record.s(0)).enqueue()

    def hanging():
        return Job.objects.filter(type="probe.record", state="active", args=[0, 3600]).first()

    wait_until(lambda: hanging() is not None and Execution.objects.filter(job_id=hanging().id).exists(),
               PATIENCE, "step 1 to start")
    reaper(env=FAST_DEATH)
    doomed.send(signal.SIGKILL)
    doomed.wait(timeout=PATIENCE)
    worker(env=FAST_DEATH)
    wait_until(lambda: finished(workflow) == "completed", PATIENCE, "the recovered workflow to complete")
    steps = list(WorkflowNode.objects.filter(workflow=workflow, kind="job").order_by("path"))
    assert [step.result["attempt"] for step in steps] == [1, 2, 1]
    assert Job.objects.filter(type="probe.record").count() == 3  # no step enqueued twice


def test_sigkill_inside_a_batch_still_fires_each_callback_once(worker, reaper):
    doomed = worker("--concurrency", "3", env=FAST_DEATH)
    workflow = django_ojs.batch(
        record.s(0), record.s(0, 3600), record.s(0),
        on_complete=collect.s("complete"), on_success=collect.s("success"), on_failure=collect.s("failure"),
    ).enqueue()
    wait_until(lambda: Job.objects.filter(type="probe.record", state="completed").count() == 2
               and Job.objects.filter(type="probe.record", state="active").exists(), PATIENCE, "two jobs done")
    reaper(env=FAST_DEATH)
    doomed.send(signal.SIGKILL)
    doomed.wait(timeout=PATIENCE)
    worker(env=FAST_DEATH)
    wait_until(lambda: finished(workflow) == "completed", PATIENCE, "the batch to complete")
    callbacks = sorted(Job.objects.filter(type="probe.collect").values_list("args", flat=True))
    assert callbacks == [["complete"], ["success"]]
    assert Execution.objects.filter(job_id__in=Job.objects.filter(type="probe.collect").values("id")).count() == 2
