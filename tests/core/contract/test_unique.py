"""Unique jobs in the store (ojs-unique-jobs): admission, conflicts, release. PostgreSQL and SQLite."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from django_ojs.models import Job
from django_ojs.protocol.errors import Duplicate, DuplicateJob
from tests.helpers import ago, event_types, reload, update

pytestmark = pytest.mark.django_db(transaction=True)


def unique_push(push, *, args=(1,), queue="u", **policy):
    return push(type="u.job", args=list(args), options={"queue": queue, "unique": {"keys": ["type", "args"], **policy}})


def test_reject_refuses_a_duplicate_and_names_the_holder(push):
    first = unique_push(push)
    with pytest.raises(DuplicateJob) as caught:
        unique_push(push)
    assert caught.value.existing_job_id == str(first.id)
    assert caught.value.details["existing_job_state"] == "available"
    assert Job.objects.count() == 1
    assert unique_push(push, args=(2,)).id != first.id  # another key


def test_ignore_returns_the_existing_job_unchanged(push):
    first = unique_push(push, on_conflict="ignore")
    again = unique_push(push, on_conflict="ignore")
    assert again.id == first.id and again.deduplicated
    # Defined on every job, as a plain attribute: False when stored anew.
    assert first.deduplicated is False and first.replaced_job_id is None
    assert again.replaced_job_id is None
    assert Job.objects.count() == 1 and event_types().count("job.enqueued") == 1


@pytest.mark.parametrize("started", [False, True])
def test_replace_cancels_the_holder_even_while_active(push, started):
    first = unique_push(push, on_conflict="replace")
    if started:
        Job.objects.fetch(["u"], worker_id="w1")
    second = unique_push(push, on_conflict="replace")
    assert second.id != first.id and second.replaced_job_id == first.id
    assert second.deduplicated is False and first.replaced_job_id is None
    assert reload(first).state == "cancelled" and reload(second).state == "available"


def test_replace_except_schedule_keeps_the_original_time(push):
    first = push(type="u.job", args=[1], options={"queue": "u", "scheduled_at": "+PT1H",
                                                   "unique": {"keys": ["type"], "on_conflict": "replace_except_schedule"}})
    second = push(type="u.job", args=[2], options={"queue": "u", "unique": {"keys": ["type"], "on_conflict": "replace_except_schedule"}})
    second = reload(second)
    assert second.state == "scheduled" and second.scheduled_at == first.scheduled_at and second.args == [2]
    assert reload(first).state == "cancelled"


def test_the_key_frees_the_moment_the_job_finishes(push):
    first = unique_push(push)
    job = Job.objects.fetch(["u"], worker_id="w1")[0]
    with pytest.raises(DuplicateJob):
        unique_push(push)  # active holds the key by default
    Job.objects.ack(job.id, result=None)
    assert unique_push(push).id != first.id


def test_states_decide_what_counts(push):
    unique_push(push, states=["available"])
    Job.objects.fetch(["u"], worker_id="w1")
    # "available" alone is widened to the live lifecycle: an active job still counts (docs/how-to/unique-jobs.md).
    with pytest.raises(DuplicateJob):
        unique_push(push, states=["available"])
    waiting = push(type="s.job", args=[], options={"queue": "s", "scheduled_at": "+PT1H",
                                                   "unique": {"states": ["scheduled"]}})
    with pytest.raises(DuplicateJob):
        push(type="s.job", args=[], options={"queue": "s", "unique": {"states": ["scheduled"]}})
    Job.objects.cancel(waiting.id)
    push(type="s.job", args=[], options={"queue": "s", "unique": {"states": ["scheduled"]}})


def test_a_lapsed_period_admits_the_next_job(push):
    first = unique_push(push, period="PT1H")
    with pytest.raises(DuplicateJob):
        unique_push(push, period="PT1H")
    update(first, unique_expires_at=ago(seconds=1))
    second = unique_push(push, period="PT1H")
    assert second.id != first.id and reload(first).unique_states is None
    assert reload(first).state == "available"  # released, not cancelled


def test_a_batch_is_checked_within_itself_and_stays_atomic(push, spec):
    body = {"type": "u.job", "args": [1], "options": {"queue": "u", "unique": {"keys": ["args"]}}}
    with pytest.raises(DuplicateJob):
        Job.objects.push_many([spec(**body), spec(type="plain.job"), spec(**body)])
    assert Job.objects.count() == 0
    ignoring = {**body, "options": {"queue": "u", "unique": {"keys": ["args"], "on_conflict": "ignore"}}}
    jobs = Job.objects.push_many([spec(**ignoring), spec(type="plain.job"), spec(**ignoring)])
    assert jobs[0].id == jobs[2].id and Job.objects.count() == 2


def test_the_database_itself_refuses_a_second_holder(push):
    first = unique_push(push)
    clone = Job.objects.get(id=first.id)
    clone.pk, clone.id = None, first.id.__class__(int=first.id.int + 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        clone.save(force_insert=True)


def test_a_dead_letter_retry_is_refused_while_another_job_holds_the_key(push):
    first = unique_push(push)
    update(first, state="discarded", finished_at=ago(seconds=1))
    holder = unique_push(push)
    with pytest.raises(DuplicateJob) as caught:
        Job.objects.resurrect(first.id)
    assert caught.value.existing_job_id == str(holder.id) and reload(first).state == "discarded"
    Job.objects.cancel(holder.id)
    assert Job.objects.resurrect(first.id).state == "available"


def test_enqueue_from_python_raises_or_returns_the_existing_job(db):
    import django_ojs

    first = django_ojs.enqueue("py.job", [1], unique={"keys": ["args"]})
    with pytest.raises(django_ojs.DuplicateJob):
        django_ojs.enqueue("py.job", [1], unique={"keys": ["args"]})
    again = django_ojs.enqueue("py.job", [1], unique={"keys": ["args"], "on_conflict": "ignore"})
    assert again.id == first.id and again.deduplicated
    plain = django_ojs.enqueue("py.job", [2])
    assert first.deduplicated is False and plain.deduplicated is False and plain.replaced_job_id is None
    assert Job.objects.get(id=first.id).deduplicated is False  # a job loaded later too


def test_a_client_id_taken_is_still_a_plain_duplicate(push):
    first = unique_push(push)
    with pytest.raises(Duplicate):
        push(type="u.job", args=[9], id=str(first.id), options={"queue": "u", "unique": {"keys": ["args"]}})


def test_the_job_decorator_gives_unique_and_rate_limit_defaults(db):
    import django_ojs
    from django_ojs.handlers.registry import registry

    @django_ojs.job("py.decorated", unique={"keys": ["args"]}, rate_limit={"key": "decorated-api", "concurrency": 1})
    def handler(ctx, n):
        return n

    try:
        first = handler.enqueue(1)
        assert first.rate_key == "decorated-api" and first.unique_key
        with pytest.raises(django_ojs.DuplicateJob):
            handler.enqueue(1)
        handler.enqueue(2)
        # A caller's own policy wins over the decorator's.
        assert handler.enqueue(1, unique={"keys": ["args"], "on_conflict": "ignore"}).id == first.id
    finally:
        registry.unregister("py.decorated")
