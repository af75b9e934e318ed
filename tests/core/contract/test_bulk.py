"""Bulk moves by filter (core/bulk.py): batches, skips with reasons, events, no waiting on locks."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from django_ojs.core import bulk
from django_ojs.models import Event, Job, JobError
from django_ojs.protocol.failure import Failure
from tests.core.contract.test_unique import unique_push
from tests.helpers import ago, reload, update
from tests.job_rows import insert_jobs


def dead(push, claim, n: int, *, queue: str = "dead") -> list[Job]:
    """``n`` jobs failed for good through the core, each with one error in its history."""
    jobs = []
    for _ in range(n):
        job = claim("w1", options={"max_attempts": 1})
        Job.objects.fail(job.id, Failure(type="Boom", message="no", retryable=False))
        jobs.append(update(job, queue=queue))
    return jobs


def test_retry_moves_every_matching_dead_job_in_batches_and_records_their_events(push, claim):
    jobs = dead(push, claim, 7)
    other = dead(push, claim, 1, queue="elsewhere")[0]
    alive = push(options={"queue": "dead"})
    report = bulk.bulk_move(Job.objects.filter(queue="dead"), "retry", batch_size=3)
    assert (report.moved, report.skipped_total, report.batches) == (7, 0, 3)
    for job in jobs:
        stored = reload(job)
        assert (stored.state, stored.attempt, stored.error, stored.finished_at) == ("available", 0, None, None)
        # ojs-dead-letter §6.1: the history stays for the next post-mortem.
        assert JobError.objects.filter(job_id=job.seq).count() == 1
    assert reload(other).state == "discarded" and reload(alive).state == "available"
    retried = Event.objects.filter(type="job.enqueued", extra__retried_from_dead_letter=True)
    assert sorted(str(e.job_id) for e in retried) == sorted(str(j.id) for j in jobs)


def test_cancel_names_the_state_each_job_left(push, claim):
    waiting = push(options={"queue": "c"})
    pending = push(options={"queue": "c", "pending": True})
    finished = push(options={"queue": "c"})
    Job.objects.cancel(finished.id)
    report = bulk.bulk_move(Job.objects.filter(queue="c"), "cancel")
    # The already-cancelled job is not a candidate at all: nothing to skip.
    assert (report.moved, report.skipped_total) == (2, 0)
    left = {str(e.job_id): e.data["previous_state"] for e in Event.objects.filter(type="job.cancelled")}
    assert left[str(waiting.id)] == "available" and left[str(pending.id)] == "pending"
    assert reload(pending).finished_at is not None


def test_purge_deletes_dead_jobs_and_their_history(push, claim):
    jobs = dead(push, claim, 3)
    report = bulk.bulk_move(Job.objects.filter(queue="dead"), "purge", batch_size=2)
    assert report.moved == 3
    assert not Job.objects.filter(seq__in=[j.seq for j in jobs]).exists()
    assert not JobError.objects.filter(job_id__in=[j.seq for j in jobs]).exists()


def test_discard_and_activate_take_only_the_states_they_may_leave(push, claim):
    pending = [push(options={"queue": "p", "pending": True}) for _ in range(2)]
    active = claim("w1")
    update(active, queue="p")
    activated = bulk.bulk_move(Job.objects.filter(queue="p"), "activate")
    assert activated.moved == 2 and all(reload(j).state == "available" for j in pending)
    discarded = bulk.bulk_move(Job.objects.filter(queue="p"), "discard")
    assert discarded.moved == 2 and reload(active).state == "active"


def test_a_limit_stops_the_walk_and_says_more_match(push, claim):
    insert_jobs(10, queue="lim")
    report = bulk.bulk_move(Job.objects.filter(queue="lim"), "retry", batch_size=4, limit=6)
    assert (report.moved, report.stopped_at) == (6, "limit")
    assert Job.objects.filter(queue="lim", state="discarded").count() == 4


def test_a_spent_time_budget_stops_between_batches_and_a_second_run_goes_on(db):
    insert_jobs(10, queue="budget")
    first = bulk.bulk_move(Job.objects.filter(queue="budget"), "retry", batch_size=4, time_budget=0)
    assert (first.moved, first.batches, first.stopped_at) == (4, 1, "time budget")
    rest = bulk.bulk_move(Job.objects.filter(queue="budget"), "retry", batch_size=4)
    assert (rest.moved, rest.truncated) == (6, False)


def test_a_retry_whose_unique_key_is_held_again_is_skipped_and_the_rest_move(push):
    first = unique_push(push)
    update(first, state="discarded", finished_at=ago(seconds=1))
    holder = unique_push(push)
    insert_jobs(3, queue="u")
    report = bulk.bulk_move(Job.objects.filter(queue="u"), "retry")
    assert report.moved == 3 and dict(report.skipped) == {bulk.UNIQUE_HELD: 1}
    assert reload(first).state == "discarded" and reload(holder).state == "available"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_row_another_transaction_holds_is_skipped_as_busy_never_waited_for():
    insert_jobs(5, queue="locked")
    held = Job.objects.filter(queue="locked").order_by("seq")[2]
    locked, release = threading.Event(), threading.Event()

    def hold_the_row():
        try:
            with transaction.atomic():
                Job.objects.select_for_update().filter(seq=held.seq).get()
                locked.set()
                release.wait(60)
        finally:
            connection.close()

    thread = threading.Thread(target=hold_the_row)
    thread.start()
    try:
        assert locked.wait(30)
        report = bulk.bulk_move(Job.objects.filter(queue="locked"), "retry", batch_size=2)
    finally:
        release.set()
        thread.join(30)
    assert report.moved == 4 and dict(report.skipped) == {bulk.BUSY: 1}
    # Run again: the skipped one moves now that nobody holds it.
    assert bulk.bulk_move(Job.objects.filter(queue="locked"), "retry").moved == 1
