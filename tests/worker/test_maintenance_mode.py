"""Maintenance mode and a real worker process: it takes nothing new, finishes what it holds, resumes after."""

from __future__ import annotations

import pytest

import django_ojs
from django_ojs.core import maintenance_mode
from django_ojs.models import Job

from .conftest import PATIENCE, heartbeats_pass, wait_until
from .probe.models import Execution

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def state_of(job: Job) -> str:
    return Job.objects.values_list("state", flat=True).get(pk=job.pk)


def test_a_worker_in_maintenance_mode_finishes_its_job_takes_no_other_and_resumes_when_it_ends(worker):
    worker("--concurrency", "2")
    running = django_ojs.enqueue("probe.record", [1.5])
    wait_until(lambda: Execution.objects.count() == 1, PATIENCE, "the first job to start")

    maintenance_mode.enter("database migration")
    # Long enough by the worker's own clock for its cached state (QUEUE_CONFIG_TTL) to lapse.
    heartbeats_pass(3)
    waiting = django_ojs.enqueue("probe.record", [0])  # the project's own enqueue: stored, it waits
    wait_until(lambda: state_of(running) == "completed", PATIENCE, "the job it held to finish")
    heartbeats_pass(4)  # and as many turns: a worker handing out jobs would have taken it
    assert state_of(waiting) == "available" and Execution.objects.count() == 1

    maintenance_mode.leave()
    wait_until(lambda: state_of(waiting) == "completed", PATIENCE, "the waiting job to run once it ended")
