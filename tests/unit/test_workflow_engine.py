"""The pure workflow engine (django_ojs/workflows.py): parsing and the container rule."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_ojs.protocol.errors import InvalidRequest
from django_ojs.protocol.workflows import DONE, MAX_DEPTH, Engine, LazyStates, Node, NodeState, parse


def job(kind: str) -> dict:
    return {"type": kind, "args": []}


def build(body: dict) -> Engine:
    return Engine.fresh(parse(body, max_jobs=100))


def run(engine: Engine, outcomes: dict[str, str]) -> list[str]:
    """Settle every enqueued job (by type) as ``outcomes`` says (default completed); return the run order."""
    order, todo = [], engine.start()
    while todo:
        item = todo.pop(0)
        order.append(item.node.type)
        todo += engine.settle(item.node.path, outcomes.get(item.node.type, "completed"), result=item.node.type)
    return order


def test_a_chain_starts_one_step_and_a_group_all():
    assert [e.node.type for e in build({"type": "chain", "steps": [job("a"), job("b")]}).start()] == ["a"]
    assert [e.node.type for e in build({"type": "group", "jobs": [job("a"), job("b")]}).start()] == ["a", "b"]


def test_settling_twice_does_nothing_the_second_time():
    engine = build({"type": "batch", "jobs": [job("a")], "callbacks": {"on_complete": job("cb")}})
    engine.start()
    assert [e.node.type for e in engine.settle("0", "completed")] == ["cb"]
    assert engine.settle("0", "completed") == []


def test_nesting_beyond_the_maximum_is_refused_at_creation():
    body = job("leaf")
    for depth in range(MAX_DEPTH + 1):
        body = {"type": "chain" if depth % 2 else "group", "steps" if depth % 2 else "jobs": [body]}
    with pytest.raises(InvalidRequest, match="nest at most"):
        parse(body, max_jobs=100)


def test_too_many_jobs_are_refused():
    with pytest.raises(InvalidRequest, match="at most 2 jobs"):
        parse({"type": "group", "jobs": [job("a"), job("b"), job("c")]}, max_jobs=2)


def test_every_fault_is_listed_with_its_path():
    with pytest.raises(InvalidRequest) as refused:
        parse({"type": "chain", "steps": [{"args": []}, {"type": "ok", "args": 1}]}, max_jobs=9)
    assert [e["path"] for e in refused.value.details["validation_errors"]] == ["$.steps[0].type", "$.steps[1].args"]


def test_a_dag_step_refused_for_its_job_keeps_its_id_for_the_steps_after_it():
    """Its fault is listed, and only its: the step that depends on it is not told its id is missing."""
    with pytest.raises(InvalidRequest) as refused:
        parse({"type": "dag", "steps": [{"id": "a", "args": []},
                                         {"id": "b", "depends_on": ["a"], "type": "ok", "args": []}]}, max_jobs=9)
    assert [e["path"] for e in refused.value.details["validation_errors"]] == ["$.steps[0].type"]


def test_the_tree_survives_its_json_form():
    root = parse({"type": "batch", "name": "n", "jobs": [{"type": "chain", "steps": [job("a"), job("b")]}],
                  "callbacks": {"on_failure": job("f")}}, max_jobs=9)
    assert Node.from_dict(root.to_dict()).to_dict() == root.to_dict()


# A random tree of chains, groups and batches with random outcomes: the workflow
# always ends, every job runs at most once, no callback fires twice, and a chain
# never starts a step after one that did not complete.
leaf = st.builds(lambda n: job(f"j{n}"), st.integers(0, 10**6))
trees = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.builds(lambda s: {"type": "chain", "steps": s}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda s: {"type": "group", "jobs": s}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda s, c: {"type": "batch", "jobs": s, "callbacks": {c: job(f"cb-{c}")}},
                  st.lists(inner, min_size=1, max_size=3), st.sampled_from(["on_complete", "on_success", "on_failure"])),
    ),
    max_leaves=8,
)


@given(tree=trees.filter(lambda t: "type" in t and t["type"] in ("chain", "group", "batch")), data=st.data())
def test_any_tree_with_any_outcomes_ends_and_runs_nothing_twice(tree, data):
    try:
        root = parse(tree, max_jobs=100)
    except InvalidRequest:
        return  # nested deeper than allowed
    engine = Engine.fresh(root)
    started: list[str] = []
    todo = engine.start()
    while todo:
        item = todo.pop(0)
        started.append(item.node.path)
        outcome = data.draw(st.sampled_from(["completed", "completed", "failed", "cancelled"]))
        todo += engine.settle(item.node.path, outcome, result=1)
    assert len(started) == len(set(started))
    assert engine.finished in DONE
    assert all(state.state in DONE for state in engine.states.values())
    for node in root.walk():
        if node.kind == "chain":
            states = [engine.states[c.path].state for c in node.children]
            first_bad = next((i for i, s in enumerate(states) if s != "completed"), None)
            if first_bad is not None:
                assert all(s == "cancelled" for s in states[first_bad + 1:])


def test_the_run_order_of_a_chain_of_groups():
    engine = build({"type": "chain", "steps": [job("a"), {"type": "group", "jobs": [job("b"), job("c")]}, job("d")]})
    assert run(engine, {}) == ["a", "b", "c", "d"]
    assert engine.finished == "completed"


# A DAG in the binding's form: each step depends on some of the steps listed before it.
dags = st.lists(st.lists(st.integers(0, 7), max_size=3), min_size=1, max_size=8).map(
    lambda deps: {"steps": [{"id": f"s{i}", "type": f"s{i}", "args": [],
                             "depends_on": sorted({f"s{d}" for d in ds if d < i})} for i, ds in enumerate(deps)]}
)


def lazy_engine(root: Node, store: dict[str, NodeState]) -> tuple[Engine, set[str]]:
    """An engine that reads ``store`` as the core reads its node rows for one advance; the paths it read."""
    read: set[str] = set()

    def load(paths):
        read.update(paths)
        return {path: copy.deepcopy(store[path]) for path in paths if path in store}

    def unended(container, known):
        prefix = container.path + "." if container.path else ""
        skipped = {container.path, *known, *(callback.path for callback in container.callbacks.values())}
        return any(state.state not in DONE for path, state in store.items()
                   if path.startswith(prefix) and path not in skipped)

    return Engine(root, LazyStates(load, unended)), read


@given(tree=st.one_of(trees.filter(lambda t: t.get("type") in ("chain", "group", "batch")), dags), data=st.data())
def test_an_engine_reading_only_what_it_needs_moves_as_one_holding_every_state(tree, data):
    """Each settle by an engine of its own over the stored states, as each ACK's advance is,
    enqueues the same jobs with the same parent_results and ends in the same states."""
    try:
        root = parse(tree, max_jobs=100)
    except InvalidRequest:
        return
    whole = Engine.fresh(root)
    todo = whole.start()
    store = copy.deepcopy(whole.states)
    while todo:
        item = todo.pop(0)
        outcome = data.draw(st.sampled_from(["completed", "completed", "failed", "cancelled"]))
        planned = whole.settle(item.node.path, outcome, result=item.node.path)
        lazy, _ = lazy_engine(root, store)
        assert [(e.node.path, e.parent_results) for e in lazy.settle(item.node.path, outcome, result=item.node.path)] \
            == [(e.node.path, e.parent_results) for e in planned]
        store.update({path: lazy.states[path] for path in lazy.changed})
        todo += planned
    assert store == whole.states


def test_settling_a_step_of_a_wide_dag_reads_its_dependents_not_the_whole_dag():
    steps = [{"id": "root", "type": "root", "args": []}]
    steps += [{"id": f"s{i}", "type": "s", "args": [], "depends_on": ["root"]} for i in range(500)]
    steps += [{"id": "join", "type": "join", "args": [], "depends_on": ["s0", "s1"]}]
    root = parse({"steps": steps}, max_jobs=1000)
    whole = Engine.fresh(root)
    whole.start()
    whole.settle("0", "completed", result="r")
    lazy, read = lazy_engine(root, whole.states)
    assert lazy.settle("1", "completed", result=1) == []
    assert read == {"", "1", "501", "2"}  # the root's inputs, the step, the join and its other dependency


def test_retrying_a_step_of_a_group_starts_again_at_once_the_members_it_had_cancelled():
    engine = build({"type": "group", "jobs": [job("a"), job("b")]})
    engine.start()
    engine.settle("0", "failed")
    engine.settle("1", "cancelled")
    assert [e.node.type for e in engine.retry("0")] == ["a", "b"]
    assert engine.settle("0", "completed") == [] and engine.settle("1", "completed") == []
    assert engine.finished == "completed"


def test_a_layered_dags_step_starts_the_next_layer_reading_its_own_layer_not_the_earlier_ones():
    # Five layers of three, each step after every step of the layer before.
    steps = [{"id": str(i), "type": "s", "args": [],
              "depends_on": [str(d) for d in range(max(i // 3 * 3 - 3, 0), i // 3 * 3)]} for i in range(15)]
    root = parse({"steps": steps}, max_jobs=100)
    whole = Engine.fresh(root)
    todo = whole.start()
    while (item := todo.pop(0)).node.path != "11":
        todo += whole.settle(item.node.path, "completed", result=item.node.path)
    lazy, read = lazy_engine(root, copy.deepcopy(whole.states))
    started = lazy.settle("11", "completed", result="11")
    assert [e.node.path for e in started] == ["12", "13", "14"]
    assert started[0].parent_results == [str(i) for i in range(12)]
    assert read == {"", "9", "10", "11", "12", "13", "14"}
