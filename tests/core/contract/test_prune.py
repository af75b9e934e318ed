"""Job.objects.prune: retention of finished jobs, the dead letter and events."""

from __future__ import annotations

import pytest

from django_ojs.models import Event, Job, JobError
from django_ojs.protocol.failure import Failure
from tests.helpers import ago, update

DAY = 86400


@pytest.fixture
def finished(push, claim):
    """``finished("completed", days_ago=8)``: a finished job whose finish lies in the past."""

    def make(state: str, *, days_ago: float, dead_letter: bool = False) -> Job:
        if state == "cancelled":
            job = push()
            Job.objects.cancel(job.id)
        else:
            policy = {"max_attempts": 1, "on_exhaustion": "dead_letter" if dead_letter else "discard"}
            job = claim(options={"retry": policy})
            if state == "completed":
                Job.objects.ack(job.id)
            else:
                Job.objects.fail(job.id, Failure(type="E", message=""))
        return update(job, finished_at=ago(days=days_ago))

    return make


def survivors() -> set[int]:
    return set(Job.objects.values_list("pk", flat=True))


@pytest.mark.parametrize("state", ["completed", "cancelled", "discarded"])
def test_finished_jobs_are_deleted_after_their_retention_of_seven_days(finished, state):
    finished(state, days_ago=8)
    recent = finished(state, days_ago=6)
    result = Job.objects.prune(100)
    assert survivors() == {recent.pk}
    assert result[state] == 1


def test_dead_letter_jobs_are_kept_for_180_days(finished):
    kept = finished("discarded", days_ago=100, dead_letter=True)
    gone = finished("discarded", days_ago=181, dead_letter=True)
    assert Job.objects.prune(100)["dead_letter"] == 1
    assert survivors() == {kept.pk}
    assert not JobError.objects.filter(job_id=gone.pk).exists()


def test_retention_is_a_setting_per_state(finished, ojs):
    ojs(RETENTION={"completed": 60, "cancelled": 30 * DAY})
    completed, cancelled = finished("completed", days_ago=0.01), finished("cancelled", days_ago=20)
    Job.objects.prune(100)
    assert survivors() == {cancelled.pk}
    assert completed.pk not in survivors()


def test_the_dead_letter_keeps_at_most_its_maximum_count_oldest_go_first(finished, ojs):
    ojs(RETENTION={"dead_letter_max_count": 2})
    jobs = [finished("discarded", days_ago=10 - n, dead_letter=True) for n in range(4)]
    assert Job.objects.prune(100)["dead_letter"] == 2
    assert survivors() == {jobs[2].pk, jobs[3].pk}


def test_unfinished_jobs_are_never_pruned(push, claim):
    waiting = update(push(), created_at=ago(days=400))
    running = update(claim(), started_at=ago(days=400))
    Job.objects.prune(100)
    assert survivors() == {waiting.pk, running.pk}


def test_a_kept_job_keeps_its_whole_story_and_its_events_go_with_it(finished, push):
    """Events are kept as long as their job (OJS["EVENTS_KEPT_WITH_JOB"]), whatever RETENTION["events"] says."""
    kept = finished("discarded", days_ago=100, dead_letter=True)
    gone = finished("discarded", days_ago=181, dead_letter=True)
    Event.objects.update(time=ago(days=181))
    story = list(Event.objects.filter(job_id=kept.id).values_list("type", flat=True))
    assert {"job.started", "job.failed", "job.discarded"} <= set(story)
    result = Job.objects.prune(100)
    assert result["dead_letter"] == 1
    assert list(Event.objects.filter(job_id=kept.id).values_list("type", flat=True)) == story
    assert not Event.objects.filter(job_id=gone.id).exists()  # with its job, in the same transaction


def test_a_purged_job_takes_its_events_with_it(finished):
    job = finished("discarded", days_ago=0, dead_letter=True)
    Job.objects.purge_dead(job.id)
    assert not Event.objects.filter(job_id=job.id).exists()


def test_old_events_of_no_job_or_of_a_job_gone_are_deleted(push):
    kept, orphan = push(), push()
    Event.objects.create(type="queue.paused", time=ago(days=2), queue="default")
    Job.objects.filter(pk=orphan.pk).delete()  # deleted by hand: its events stay behind
    Event.objects.update(time=ago(days=2))
    fresh = push()
    assert Job.objects.prune(100)["events"] == 2  # the queue's event, the orphan's job.enqueued
    assert sorted(Event.objects.values_list("job_id", flat=True)) == sorted([kept.id, fresh.id])


def test_without_events_kept_with_their_job_every_old_event_goes(push, ojs):
    ojs(EVENTS_KEPT_WITH_JOB=False)
    push()
    Event.objects.update(time=ago(days=2))
    push()
    assert Job.objects.prune(100)["events"] == 1
    assert Event.objects.count() == 1


def test_pruning_deletes_at_most_the_limit_per_kind(finished):
    for _ in range(3):
        finished("completed", days_ago=8)
    assert Job.objects.prune(2)["completed"] == 2
    assert Job.objects.prune(2)["completed"] == 1
