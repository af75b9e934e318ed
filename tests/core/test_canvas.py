"""Composing workflows in Python (django_ojs/canvas.py) from handlers' signatures."""

from __future__ import annotations

import pytest
from django.db import transaction

import django_ojs
from django_ojs.canvas import Chain, Signature
from django_ojs.handlers.registry import registry
from django_ojs.models import Job, Workflow
from django_ojs.protocol.errors import InvalidRequest


@pytest.fixture
def handlers():
    fetch = registry.register("canvas.fetch", lambda ctx, url: url, {"queue": "net", "retry": {"max_attempts": 5}})
    parse = registry.register("canvas.parse", lambda ctx: ctx.parent_results)
    yield fetch, parse
    registry.unregister("canvas.fetch")
    registry.unregister("canvas.parse")


def test_pipes_build_one_flat_chain_and_handler_defaults_apply(db, handlers):
    fetch, parse = handlers
    pipeline = fetch.s("https://a") | parse.s() | parse.s().set(queue="slow")
    assert isinstance(pipeline, Chain) and len(pipeline.steps) == 3
    assert (parse.s() | (parse.s() | parse.s())).steps == (parse.s(), parse.s(), parse.s())
    workflow = pipeline.enqueue(name="crawl")
    assert (workflow.type, workflow.name, workflow.state) == ("chain", "crawl", "running")
    [first] = Job.objects.all()
    assert (first.type, first.args, first.queue, first.max_attempts) == ("canvas.fetch", ["https://a"], "net", 5)
    steps = workflow.definition["children"]
    assert steps[2]["body"]["options"]["queue"] == "slow"


def test_group_and_batch_take_signatures_or_one_iterable(db, handlers):
    fetch, parse = handlers
    group = django_ojs.group(fetch.s(url) for url in ("a", "b", "c"))
    assert len(group.jobs) == 3
    batch = django_ojs.batch([fetch.s("a"), fetch.s("b")], on_complete=parse.s(), on_failure=parse.s())
    workflow = batch.enqueue()
    assert workflow.type == "batch" and Job.objects.count() == 2
    assert set(workflow.definition["callbacks"]) == {"on_complete", "on_failure"}


def test_nested_composition_matches_the_http_shape(handlers):
    fetch, parse = handlers
    tree = django_ojs.chain(fetch.s("x"), django_ojs.group(parse.s(), parse.s()), parse.s())
    definition = tree.definition()
    assert [step["type"] for step in definition["steps"]] == ["canvas.fetch", "group", "canvas.parse"]
    assert definition["steps"][1]["jobs"][0] == {"type": "canvas.parse", "args": [], "options": {}}


def test_enqueue_rolls_back_with_the_callers_transaction(transactional_db, handlers):
    fetch, _ = handlers
    with pytest.raises(RuntimeError), transaction.atomic():
        django_ojs.chain(fetch.s("a"), fetch.s("b")).enqueue()
        raise RuntimeError("the order was not saved")
    assert not Workflow.objects.exists() and not Job.objects.exists()
    with transaction.atomic():
        django_ojs.chain(fetch.s("a"), fetch.s("b")).enqueue()
    assert Workflow.objects.count() == 1 and Job.objects.count() == 1


def test_bad_steps_are_refused(db, handlers):
    fetch, _ = handlers
    with pytest.raises(TypeError):
        django_ojs.chain(fetch.s("a"), "not a signature")
    with pytest.raises(InvalidRequest):
        django_ojs.chain(Signature("canvas.fetch", ("a",), {"retry": {"max_attempts": -1}})).enqueue()
    with pytest.raises(TypeError):
        fetch.s("a") | 3


def test_steps_take_the_handlers_arguments_and_options_through_using(handlers):
    fetch, _ = handlers
    # A keyword naming a parameter is placed at its position, as for enqueue.
    assert fetch.s(url="https://b") == Signature("canvas.fetch", ("https://b",), {})
    step = fetch.using(queue="slow", priority="high").s("https://c")
    assert step.definition() == {
        "type": "canvas.fetch", "args": ["https://c"], "options": {"queue": "slow", "priority": "high", "retry": {"max_attempts": 5}},
    }
    with pytest.raises(TypeError):
        fetch.s("https://d", url="https://e")  # the same argument twice
