"""Enqueue from Python: transactional with the app's rows, handler defaults, middleware."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction
from django.utils import timezone

import django_ojs
from django_ojs.handlers import middleware as mw
from django_ojs.models import Job
from django_ojs.protocol.errors import InvalidRequest

from .probe.models import Order


class Boom(Exception):
    pass


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_leaves_no_job():
    with pytest.raises(Boom), transaction.atomic():
        Order.objects.create(reference="A-1")
        django_ojs.enqueue("probe.record", [0])
        raise Boom
    assert not Order.objects.exists()
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_committed_transaction_stores_the_job_with_the_rows():
    with transaction.atomic():
        order = Order.objects.create(reference="A-2")
        job = django_ojs.enqueue("probe.record", [order.pk])
    assert Job.objects.get(id=job.id).args == [order.pk]


@pytest.mark.django_db(transaction=True)
def test_a_batch_is_all_or_nothing():
    with pytest.raises(InvalidRequest):
        django_ojs.enqueue_many([{"type": "probe.record"}, {"type": "Not A Type"}])
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_options_accept_python_values_and_handler_defaults_apply():
    @django_ojs.job("probe.defaults", queue="mail", priority=5, retry={"max_attempts": 7})
    def handler(ctx):
        return None

    try:
        later = timezone.now() + dt.timedelta(hours=1)
        job = handler.enqueue(timeout=dt.timedelta(seconds=90), scheduled_at=later, priority=1)
        assert (job.queue, job.priority, job.max_attempts) == ("mail", 1, 7)
        assert job.timeout == dt.timedelta(seconds=90)
        assert job.state == "scheduled" and abs(job.scheduled_at - later) < dt.timedelta(milliseconds=1)
    finally:
        from django_ojs.handlers.registry import registry

        registry.unregister("probe.defaults")


@pytest.mark.django_db
def test_scheduled_at_and_expires_at_take_a_timedelta_from_now():
    before = timezone.now()
    job = django_ojs.enqueue("probe.record", [0], scheduled_at=dt.timedelta(minutes=5),
                             expires_at=dt.timedelta(hours=2))
    after = timezone.now()
    job.refresh_from_db()
    assert job.state == "scheduled"
    # Resolved against the database clock, which may differ from ours by a little.
    slack = dt.timedelta(seconds=5)
    assert before + dt.timedelta(minutes=5) - slack <= job.scheduled_at <= after + dt.timedelta(minutes=5) + slack
    assert before + dt.timedelta(hours=2) - slack <= job.expires_at <= after + dt.timedelta(hours=2) + slack
    with pytest.raises(InvalidRequest) as raised:
        django_ojs.enqueue("probe.record", [0], scheduled_at=dt.timedelta(seconds=-1))
    assert raised.value.field == "scheduled_at"


@pytest.mark.django_db
def test_invalid_options_name_the_field():
    with pytest.raises(InvalidRequest) as raised:
        django_ojs.enqueue("probe.record", [], priority=1000)
    assert raised.value.field == "options.priority"


class TagWithTenant:
    def __call__(self, job, call_next):
        job.meta = {**job.meta, "tenant": "acme"}
        return call_next(job)


def drop_dry_runs(job, call_next):
    return None if job.meta.get("dry_run") else call_next(job)


def rewrite_id(job, call_next):
    from uuid6 import uuid7

    job.id = uuid7()
    return call_next(job)


@pytest.fixture
def enqueue_middleware(ojs):
    def configure(*paths: str) -> None:
        ojs(ENQUEUE_MIDDLEWARE=list(paths))

    yield configure
    mw.reset_chains()


@pytest.mark.django_db
def test_enqueue_middleware_modifies_and_drops(enqueue_middleware):
    enqueue_middleware(f"{__name__}.TagWithTenant", f"{__name__}.drop_dry_runs")
    kept, dropped = django_ojs.enqueue_many(
        [{"type": "probe.record"}, {"type": "probe.record", "meta": {"dry_run": True}}]
    )
    assert kept.meta == {"tenant": "acme"}
    assert dropped is None
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_enqueue_middleware_may_not_change_the_id(enqueue_middleware):
    enqueue_middleware(f"{__name__}.rewrite_id")
    with pytest.raises(InvalidRequest, match="ids are immutable"):
        django_ojs.enqueue("probe.record")
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_using_sets_options_and_keywords_fill_positions():
    @django_ojs.job("probe.typed", queue="mail")
    def handler(ctx, to, subject="Hi", urgent=False):
        return None

    try:
        job = handler.using(queue="urgent", priority=3, tags=["t"]).enqueue("a@x", urgent=True)
        assert (job.queue, job.priority, job.tags, job.args) == ("urgent", 3, ["t"], ["a@x", "Hi", True])
        assert handler.enqueue(to="b@x", subject="S").args == ["b@x", "S"]
        # The older spelling, options as keywords beside the args, still works.
        assert handler.enqueue("c@x", priority=2).priority == 2
        with pytest.raises(TypeError):
            handler.enqueue("a@x", to="b@x")
        assert Job.objects.count() == 3
    finally:
        from django_ojs.handlers.registry import registry

        registry.unregister("probe.typed")


@pytest.mark.django_db
def test_a_kind_of_job_is_parsed_once_across_enqueues_and_anew_when_its_defaults_change(monkeypatch):
    """The second ``enqueue`` of a kind (type and simple options) copies the first's parsed spec
    with its own args; a changed ``OJS`` setting or handler parses anew."""
    from django.test import override_settings

    from django_ojs.handlers import options
    from django_ojs.handlers.registry import registry

    parsed: list[str] = []
    parse_job = options.parse_job
    monkeypatch.setattr(options, "parse_job", lambda body, **kwargs: parsed.append(body["type"]) or parse_job(
        body, **kwargs))
    kind = {"queue": "parsed-once", "priority": -37}
    first = django_ojs.enqueue("probe.record", [1], **kind)
    second = django_ojs.enqueue("probe.record", [2], **kind)
    assert parsed == ["probe.record"]
    assert [(job.args, job.queue, job.priority) for job in (first, second)] == [
        ([1], "parsed-once", -37), ([2], "parsed-once", -37)]
    assert first.id != second.id
    with override_settings(OJS={"DEFAULT_RETRY": {"max_attempts": 9}}):
        assert django_ojs.enqueue("probe.record", [3], **kind).max_attempts == 9
    assert django_ojs.enqueue("probe.record", [4], **kind).max_attempts != 9
    assert parsed == ["probe.record"] * 3

    for queue in ("first-handler", "second-handler"):
        django_ojs.job("probe.kind-of-handler", queue=queue)(lambda ctx: None)
        try:
            assert django_ojs.enqueue("probe.kind-of-handler", [0]).queue == queue
        finally:
            registry.unregister("probe.kind-of-handler")
