"""A bulk move of 100,000 jobs over the admin API: bounded batches, a lock a worker holds never waited for."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from django_ojs.core.bulk import BATCH_SIZE
from django_ojs.models import Job
from tests.job_rows import insert_jobs
from tests.waiting import PATIENCE

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

JOBS = 100_000


def test_a_bulk_cancel_of_100000_jobs_moves_them_in_batches_and_skips_the_one_a_worker_holds(transactional_db, api):
    insert_jobs(JOBS, state="available", queue="big", analyze=True)
    held = Job.objects.filter(queue="big").order_by("seq").values_list("pk", "id")[JOBS // 2]
    locked, release = threading.Event(), threading.Event()

    def worker_holds_its_row() -> None:
        # As a worker's FETCH or ACK holds it: until the bulk move is over.
        try:
            with transaction.atomic():
                Job.objects.select_for_update().get(pk=held[0])
                locked.set()
                release.wait(PATIENCE * 5)
        finally:
            connections.close_all()

    holder = threading.Thread(target=worker_holds_its_row)
    holder.start()
    replies = []
    try:
        assert locked.wait(PATIENCE)
        request = {"filter": {"queue": "big", "state": "available"}, "confirm": True}
        # A request answers within its time budget; the same request again goes on.
        while not replies or not replies[-1]["complete"]:
            replies.append(api.post("/ojs/v1/admin/jobs/bulk/cancel", request).json())
    finally:
        release.set()
        holder.join(PATIENCE)

    assert sum(reply["succeeded"] for reply in replies) == JOBS - 1
    # Each batch is one transaction of at most BATCH_SIZE rows: the first walk alone takes JOBS / BATCH_SIZE.
    assert sum(reply["batches"] for reply in replies) >= JOBS // BATCH_SIZE
    last = replies[-1]
    assert last["skipped_by_reason"] == {"busy": 1} and last["errors"][0]["job_id"] == str(held[1])
    assert Job.objects.get(pk=held[0]).state == "available"
    assert Job.objects.filter(queue="big", state="cancelled").count() == JOBS - 1
    # Once the worker lets go, the same request takes the last one.
    again = api.post("/ojs/v1/admin/jobs/bulk/cancel", request).json()
    assert (again["succeeded"], again["complete"]) == (1, True)
