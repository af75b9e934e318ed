"""A running batch or group grows (pure: ``protocol.workflows``): ``growable``, ``grow``, ``parse_added``."""

from __future__ import annotations

import pytest

from django_ojs.protocol.errors import InvalidRequest
from django_ojs.protocol.workflows import Engine, parse, parse_added


def job(kind: str) -> dict:
    return {"type": kind, "args": []}


def engine_of(body: dict) -> tuple[Engine, list]:
    engine = Engine.fresh(parse(body, max_jobs=100))
    return engine, engine.start()


def test_added_jobs_start_at_once_and_hold_the_callback_back():
    engine, _ = engine_of({"type": "batch", "jobs": [job("a")], "callbacks": {"on_complete": job("cb")}})
    assert engine.growable("") is None
    [added] = engine.grow("", [job("b")])
    assert (added.node.path, added.parent_results, engine.states["1"].state) == ("1", [], "pending")
    assert engine.settle("0", "completed", result=1) == []  # b still runs: no callback
    [callback] = engine.settle("1", "completed", result=2)
    assert (callback.node.path, callback.parent_results) == ("on_complete", [1, 2])
    assert engine.growable("") == "the batch's callbacks have fired"
    assert ("added", engine.nodes["1"]) in engine.events


def test_a_nested_group_takes_its_containers_inputs_and_a_chain_or_ended_group_is_refused():
    engine, _ = engine_of({"type": "chain", "steps": [job("a"), {"type": "group", "jobs": [job("b")]}]})
    assert engine.growable("") == "the root is not a batch or a group"
    assert engine.growable("1") == "the group is waiting"
    engine.settle("0", "completed", result="r")
    [added] = engine.grow("1", [job("c")])
    assert (added.node.path, added.parent_results) == ("1.1", ["r"])
    engine.settle("1.0", "completed")
    engine.settle("1.1", "completed")
    assert engine.growable("1") == "the group is completed"


def test_parse_added_checks_each_job_and_the_room_left():
    assert parse_added({"jobs": [job("a")]}, room=1) == [job("a")]
    with pytest.raises(InvalidRequest, match="room for 0 more"):
        parse_added({"jobs": [job("a")]}, room=0)
    with pytest.raises(InvalidRequest) as refused:
        parse_added({"jobs": [job("a"), {"type": "b", "args": [], "id": "mine"}]}, room=5)
    assert refused.value.details["validation_errors"][0]["path"] == "$.jobs[1].id"
