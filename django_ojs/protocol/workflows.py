"""Workflow definitions and how they advance (pure: no database).

A workflow is a tree (ojs-workflows §10): leaves are jobs, inner nodes are
containers -- ``chain`` (ordered steps), ``group`` (parallel jobs), ``batch``
(a group with callbacks) and ``dag`` (the HTTP binding's §14.1 form,
``steps[].id`` + ``depends_on``). One container rule runs them all: a child
starts once every sibling it depends on has completed, and is cancelled once
one of them ended any other way. A chain is a container whose step *k*
depends on step *k-1*; a group one with no dependencies; a dag one with the
dependencies the client named. So the binding's DAG costs no second engine
(docs/explanation/decisions.md).

``parse`` validates a definition into ``Node`` trees; ``Engine`` holds the
states of one workflow's nodes and turns an event (start, a job's outcome,
cancel) into the node states that change and the jobs to enqueue. The core
(``core/workflows.py``) loads and stores the states around it, under the
workflow's row lock.

A job's outcome reads only the states it can change or needs: the settled
node, the siblings that depend on it and their other dependencies, the
results passed on; whether a container has a member not yet ended is asked
of the store. So the core hands the engine ``LazyStates``, read from the
store as they are asked for, and an ACK costs the same in a workflow of ten
steps and of a thousand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from .envelope import parse_job
from .errors import InvalidRequest, OJSError
from .states import JobState

CONTAINERS = ("chain", "group", "batch")
CALLBACKS = ("on_complete", "on_success", "on_failure")
# Containers inside containers (ojs-workflows §10.2 asks for at least 3 levels).
MAX_DEPTH = 4

# Node states. Leaves: waiting -> pending (job enqueued) -> completed | failed |
# cancelled. Containers: waiting -> running -> completed | failed | cancelled.
# A batch callback whose condition did not hold ends ``skipped``.
WAITING, PENDING, RUNNING = "waiting", "pending", "running"
COMPLETED, FAILED, CANCELLED, SKIPPED = "completed", "failed", "cancelled", "skipped"
DONE = frozenset({COMPLETED, FAILED, CANCELLED, SKIPPED})


@dataclass
class Node:
    path: str  # "" for the root, then "1", "1.0", "2.on_success", ...
    kind: str  # "job" or a container: chain, group, batch, dag
    body: dict[str, Any] | None = None  # a job's envelope as given, minus workflow fields
    children: list[Node] = field(default_factory=list)
    deps: list[int] = field(default_factory=list)  # indexes of siblings this child waits for
    callbacks: dict[str, Node] = field(default_factory=dict)
    name: str = ""
    key: str = ""  # a dag step's id

    @property
    def type(self) -> str:
        return self.body["type"] if self.body else self.kind

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()
        for callback in self.callbacks.values():
            yield from callback.walk()

    def leaves(self) -> list[Node]:
        return [node for node in self.walk() if node.kind == "job"]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "kind": self.kind}
        for name in ("body", "name", "key"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.deps:
            out["deps"] = self.deps
        if self.children:
            out["children"] = [child.to_dict() for child in self.children]
        if self.callbacks:
            out["callbacks"] = {name: node.to_dict() for name, node in self.callbacks.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Node:
        return cls(
            path=data["path"],
            kind=data["kind"],
            body=data.get("body"),
            children=[cls.from_dict(child) for child in data.get("children", [])],
            deps=list(data.get("deps", [])),
            callbacks={name: cls.from_dict(node) for name, node in data.get("callbacks", {}).items()},
            name=data.get("name", ""),
            key=data.get("key", ""),
        )


# -- parsing -------------------------------------------------------------------


class _Errors:
    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append({"path": path, "message": message})


def parse(body: object, *, max_jobs: int, job_options: Mapping[str, Any] | None = None) -> Node:
    """Validate a workflow request into its tree; raise InvalidRequest listing every fault.

    ``job_options`` are passed to ``envelope.parse_job`` for each job, so a
    definition is refused at creation for anything its jobs would be refused
    for later (ojs-workflows §10.2: never fail at runtime what creation can see).
    """
    errors = _Errors()
    if not isinstance(body, Mapping):
        raise InvalidRequest("the workflow must be a JSON object")
    kind = body.get("type")
    if kind is None and isinstance(body.get("steps"), list):
        kind = "dag"  # the binding's form has no type (ojs-http-binding §14.1)
    if kind not in (*CONTAINERS, "dag"):
        raise InvalidRequest(
            "type must be one of chain, group, batch (or omitted, with steps[].depends_on, for a DAG)",
            field="type",
        )
    if body.get("name") is not None and (not isinstance(body.get("name"), str) or len(body["name"]) > 255):
        errors.add("$.name", "name must be a string of at most 255 characters")
    root = _container(body, kind, "", "$", 1, errors, dict(job_options or {}))
    leaves = len(root.leaves()) if root else 0
    if root is not None and leaves > max_jobs:
        errors.add("$", f"a workflow holds at most {max_jobs} jobs; this one has {leaves}")
    if errors.items:
        first = errors.items[0]
        raise InvalidRequest(
            f"workflow validation failed: {first['path']}: {first['message']}",
            field=first["path"],
            details={"validation_errors": errors.items[:50]},
        )
    assert root is not None  # _container returns None only after recording an error
    root.name = body.get("name") or ""
    return root


def _container(body: Mapping[str, Any], kind: str, path: str, where: str, depth: int, errors: _Errors,
               job_options: dict[str, Any]) -> Node | None:
    if depth > MAX_DEPTH:
        errors.add(where, f"workflows nest at most {MAX_DEPTH} levels deep")
        return None
    name = body.get("name")
    node = Node(path=path, kind=kind, name=name if isinstance(name, str) else "")
    member_field = "steps" if kind in ("chain", "dag") else "jobs"
    members = body.get(member_field)
    if not isinstance(members, list) or not members:
        errors.add(f"{where}.{member_field}", f"{member_field} must be a non-empty array")
        return node
    options = body.get("options")
    if kind == "dag" and options is not None:
        if not isinstance(options, Mapping):
            errors.add(f"{where}.options", "options must be an object")
        else:
            job_options = {**job_options, "defaults": dict(options)}
    for index, member in enumerate(members):
        child_where = f"{where}.{member_field}[{index}]"
        child = _member(member, _join(path, str(index)), child_where, depth, errors, job_options, dag=kind == "dag")
        node.children.append(child or Node(path=_join(path, str(index)), kind="job"))
    if kind == "chain":
        for index, child in enumerate(node.children[1:], start=1):
            child.deps = [index - 1]
    elif kind == "dag":
        _dag_edges(node, members, where, errors)
    if kind == "batch":
        callbacks = body.get("callbacks")
        if not isinstance(callbacks, Mapping) or not any(callbacks.get(name) for name in CALLBACKS):
            errors.add(f"{where}.callbacks", "a batch needs at least one of on_complete, on_success, on_failure")
        else:
            for name in sorted(set(callbacks) - set(CALLBACKS)):
                errors.add(f"{where}.callbacks.{name}", "unknown callback")
            for name in CALLBACKS:
                if callbacks.get(name) is not None:
                    callback = _job(callbacks[name], _join(path, name), f"{where}.callbacks.{name}", errors, job_options)
                    if callback is not None:
                        node.callbacks[name] = callback
    return node


def _member(member: object, path: str, where: str, depth: int, errors: _Errors, job_options: dict[str, Any],
            *, dag: bool) -> Node | None:
    if not isinstance(member, Mapping):
        errors.add(where, "must be a JSON object")
        return None
    if not dag and member.get("type") in CONTAINERS:
        return _container(member, member["type"], path, where, depth + 1, errors, job_options)
    if dag:
        key = member.get("id")
        if not isinstance(key, str) or not key or len(key) > 255:
            errors.add(f"{where}.id", "a DAG step needs an id: a non-empty string")
        member = {k: v for k, v in member.items() if k not in ("id", "depends_on")}
        # A step refused for its job keeps its id on the stand-in: the steps that depend on it, and a
        # second step of its id, are judged as they are, not told "no step has id".
        node = _job(member, path, where, errors, job_options) or Node(path=path, kind="job")
        if isinstance(key, str):
            node.key = key
        return node
    return _job(member, path, where, errors, job_options)


def _job(member: object, path: str, where: str, errors: _Errors, job_options: dict[str, Any]) -> Node | None:
    if not isinstance(member, Mapping):
        errors.add(where, "must be a job: a JSON object with type and args")
        return None
    options = dict(job_options)
    defaults = options.pop("defaults", None)
    body = dict(member)
    # openapi's WorkflowJobRequest names its jobs; the name is the step's, not the job's.
    name = body.pop("name", None)
    if name is not None and not isinstance(name, str):
        errors.add(f"{where}.name", "name must be a string")
        return None
    if defaults and isinstance(body.get("options") or {}, Mapping):
        body["options"] = {**defaults, **(body.get("options") or {})}
    # A job id chosen by the client could be taken by the time the step is
    # enqueued, and a unique policy could refuse it then: both would fail the
    # step long after creation, so both are refused now.
    if body.get("id") is not None:
        errors.add(f"{where}.id", "jobs in a workflow get their ids when they are enqueued; omit id")
        return None
    given_options = body.get("options")
    opts = given_options if isinstance(given_options, Mapping) else {}
    if body.get("unique") is not None or opts.get("unique") is not None:
        errors.add(f"{where}.options.unique", "unique jobs cannot be workflow steps")
        return None
    if "args" not in body:
        body["args"] = []  # openapi's WorkflowJobRequest makes args optional
    try:
        parse_job(body, **options)
    except OJSError as exc:
        field_name = exc.details.get("field") if isinstance(exc.details, dict) else None
        errors.add(f"{where}.{field_name}" if field_name else where, exc.message)
        return None
    return Node(path=path, kind="job", body=body, name=name or "")


def parse_added(body: object, *, room: int, job_options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Validate the jobs to add to a running batch or group (``{"jobs": [...]}``); return their bodies.

    Each is checked as a workflow's job is at creation; ``room`` is how many
    more jobs the workflow may hold. InvalidRequest lists every fault.
    """
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    members = body.get("jobs")
    if not isinstance(members, list) or not members:
        raise InvalidRequest("jobs must be a non-empty array", field="jobs")
    if len(members) > room:
        raise InvalidRequest(f"the workflow has room for {max(room, 0)} more jobs; {len(members)} were sent",
                             field="jobs")
    errors = _Errors()
    added = [_job(member, "", f"$.jobs[{index}]", errors, dict(job_options or {}))
             for index, member in enumerate(members)]
    if errors.items:
        first = errors.items[0]
        raise InvalidRequest(
            f"job validation failed: {first['path']}: {first['message']}",
            field=first["path"],
            details={"validation_errors": errors.items[:50]},
        )
    return [node.body for node in added if node is not None and node.body is not None]


def _dag_edges(node: Node, members: list[Any], where: str, errors: _Errors) -> None:
    keys: dict[str, int] = {}
    for index, child in enumerate(node.children):
        if child.key:
            if child.key in keys:
                errors.add(f"{where}.steps[{index}].id", f"step id {child.key!r} is used twice")
            keys[child.key] = index
    for index, (child, member) in enumerate(zip(node.children, members)):
        deps = member.get("depends_on", []) if isinstance(member, Mapping) else []
        if deps is None:
            deps = []
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            errors.add(f"{where}.steps[{index}].depends_on", "depends_on must be an array of step ids")
            continue
        for dep in deps:
            if dep not in keys:
                errors.add(f"{where}.steps[{index}].depends_on", f"no step has id {dep!r}")
            elif keys[dep] == index:
                errors.add(f"{where}.steps[{index}].depends_on", "a step cannot depend on itself")
        child.deps = sorted({keys[dep] for dep in deps if dep in keys and keys[dep] != index})
    cycle = _find_cycle(node.children)
    if cycle:
        errors.add(f"{where}.steps", "depends_on forms a cycle: " + " -> ".join(cycle))


def _find_cycle(children: list[Node]) -> list[str]:
    state: dict[int, int] = {}  # 1 = on the path, 2 = done

    def visit(index: int, trail: list[int]) -> list[int]:
        state[index] = 1
        for dep in children[index].deps:
            if state.get(dep) == 1:
                return [*trail, index, dep]
            if dep not in state:
                found = visit(dep, [*trail, index])
                if found:
                    return found
        state[index] = 2
        return []

    for index in range(len(children)):
        if index not in state:
            found = visit(index, [])
            if found:
                return [children[i].key or str(i) for i in found]
    return []


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part


def shown_state(node_state: str, job_state: str | None) -> str:
    """A step's state as the workflow's readers see it: ``active`` while its job runs (ojs-workflows §4.4)."""
    return "active" if node_state == PENDING and job_state == JobState.ACTIVE else node_state


# -- advancing -----------------------------------------------------------------


@dataclass
class NodeState:
    state: str = WAITING
    inputs: list[Any] | None = None  # the parent_results the node started with
    result: Any = None
    error: Any = None


class LazyStates(dict[str, NodeState]):
    """Node states by path, read through ``load`` the first time each is asked for.

    ``load`` gets paths not read yet and returns the states of those that
    exist. ``want`` reads many at once, before the engine walks them.
    ``unended(container, read)`` says whether a node of the container's
    subtree, other than its callbacks and the ``read`` paths, has not ended
    in the store: since a node ends only once its subtree has, that is
    whether a member not read yet is still open, asked without reading them.
    """

    def __init__(self, load: Callable[[list[str]], Mapping[str, NodeState]],
                 unended: Callable[[Node, set[str]], bool]):
        super().__init__()
        self.load = load
        self.unended = unended

    def want(self, paths: Iterable[str]) -> None:
        missing = [path for path in dict.fromkeys(paths) if not dict.__contains__(self, path)]
        if missing:
            self.update(self.load(missing))

    def __missing__(self, path: str) -> NodeState:
        self.want([path])
        return dict.__getitem__(self, path)


class Shape:
    """A workflow's tree and what the engine looks up in it: each node by path, its
    container, and the siblings that depend on it. Read-only, except by ``Engine.grow``."""

    def __init__(self, root: Node):
        self.root = root
        self.nodes = {node.path: node for node in root.walk()}
        self.parents: dict[str, Node] = {}
        self.dependents: dict[str, list[int]] = {}  # sibling indexes, in order
        for node in root.walk():
            for child in [*node.children, *node.callbacks.values()]:
                self.parents[child.path] = node
            for index, child in enumerate(node.children):
                for dep in child.deps:
                    self.dependents.setdefault(node.children[dep].path, []).append(index)


@dataclass
class Enqueue:
    """A job to create for a leaf that starts now, with its ``parent_results``."""

    node: Node
    parent_results: list[Any]


class Engine:
    """The states of one workflow's nodes, and the moves that change them.

    Every method returns the jobs to enqueue; ``changed`` collects the paths
    whose state changed, for the caller to write. ``finished`` is the
    workflow's terminal state once the root container ends. ``states`` holds
    every node's state, or is ``LazyStates`` that read them when needed.
    """

    def __init__(self, shape: Node | Shape, states: MutableMapping[str, NodeState]):
        self.shape = shape if isinstance(shape, Shape) else Shape(shape)
        self.root = self.shape.root
        self.nodes = self.shape.nodes
        self.parents = self.shape.parents
        self.states = states
        self.changed: set[str] = set()
        self.events: list[tuple[str, Node]] = []  # (what happened, node), for workflow events

    @classmethod
    def fresh(cls, root: Node) -> Engine:
        return cls(root, {node.path: NodeState() for node in root.walk()})

    def _want(self, nodes: Iterable[Node]) -> None:
        """Read the states of ``nodes`` at once, when they are read from the store."""
        if isinstance(self.states, LazyStates):
            self.states.want(node.path for node in nodes)

    @property
    def finished(self) -> str | None:
        state = self.states[""].state
        return state if state in DONE else None

    def _set(self, path: str, state: str, **values: Any) -> None:
        node_state = self.states[path]
        node_state.state = state
        for name, value in values.items():
            setattr(node_state, name, value)
        self.changed.add(path)

    def _unended(self, container: Node) -> bool:
        """Has a member of the container not ended yet?"""
        if not isinstance(self.states, LazyStates):
            return any(self.states[child.path].state not in DONE for child in container.children)
        read = {path for path in self.states if path.startswith(container.path)}
        callbacks = {callback.path for callback in container.callbacks.values()}
        if any(self.states[path].state not in DONE for path in read
               if self.parents.get(path) is container and path not in callbacks):
            return True
        return self.states.unended(container, read)

    # Moves ---------------------------------------------------------------

    def start(self) -> list[Enqueue]:
        out: list[Enqueue] = []
        self._start(self.root, [], out)
        return out

    def settle(self, path: str, state: str, *, result: Any = None, error: Any = None) -> list[Enqueue]:
        """A leaf's job ended: ``completed``, ``failed`` or ``cancelled``."""
        out: list[Enqueue] = []
        container = self.parents[path]
        # What the move reads, at once: the step, its container, the steps after it and what they wait for.
        after = [container.children[index] for index in self.shape.dependents.get(path, [])]
        self._want([self.nodes[path], container, *after, *(container.children[d] for step in after for d in step.deps)])
        if self.states[path].state in DONE:
            return out  # settled before: nothing happens twice
        self._set(path, state, result=result if state == COMPLETED else None, error=error)
        self.events.append((state, self.nodes[path]))
        self._reconsider(self.parents[path], out, ended=self.nodes[path])
        return out

    def cancel(self) -> list[Node]:
        """Cancel every node not yet ended; return the leaves whose jobs must be cancelled."""
        open_jobs = []
        self._want(self.root.walk())
        for node in self.root.walk():
            node_state = self.states[node.path]
            if node_state.state in DONE:
                continue
            if node.kind == "job" and node_state.state == PENDING:
                open_jobs.append(node)
            self._set(node.path, CANCELLED)
        return open_jobs

    def retry(self, path: str) -> list[Enqueue]:
        """Run a failed leaf again, and let the workflow go on from there.

        Its containers, and every node that ended because of its failure,
        go back to waiting or running; nothing that completed runs again.
        """
        node = self.nodes[path]
        if node.kind != "job" or self.states[path].state not in (FAILED, CANCELLED):
            raise ValueError(f"step {path} has not failed")
        inputs = self.states[path].inputs or []
        chain = []
        parent = self.parents.get(path)
        while parent is not None:
            chain.append(parent)
            parent = self.parents.get(parent.path)
        for container in chain:
            self._set(container.path, RUNNING)
            for child in [*container.children, *container.callbacks.values()]:
                if self.states[child.path].state in (CANCELLED, SKIPPED) and child.path != path:
                    for sub in child.walk():
                        self._set(sub.path, WAITING, error=None)
        out: list[Enqueue] = []
        self._set(path, WAITING, error=None)
        self._start(node, inputs, out)
        # A sibling set back to waiting whose dependency ended otherwise is cancelled again now,
        # as a settle looks only at the dependents of what it ended.
        for container in chain:
            self._reconsider(container, out)
        return out

    def growable(self, path: str) -> str | None:
        """Why jobs cannot be added to the container at ``path`` now, or None when they can.

        A group takes new jobs while it runs; a batch also only until its
        callbacks fire, which is when every job it holds has ended: a job added
        after would run outside the outcome the callbacks were given.
        """
        node = self.nodes.get(path)
        if node is None or node.kind not in ("group", "batch"):
            return f"{path or 'the root'} is not a batch or a group"
        if self.states[path].state != RUNNING:
            return f"the {node.kind} is {self.states[path].state}"
        if any(self.states[callback.path].state != WAITING for callback in node.callbacks.values()):
            return "the batch's callbacks have fired"
        return None

    def grow(self, path: str, bodies: list[dict[str, Any]]) -> list[Enqueue]:
        """Add jobs to the running batch or group at ``path`` (``growable``) and start them.

        They take the next positions among its jobs, start with the
        container's own inputs as every job of a group does, and count for
        its end and its callbacks like the jobs it was created with.
        """
        container = self.nodes[path]
        out: list[Enqueue] = []
        for body in bodies:
            node = Node(path=_join(path, str(len(container.children))), kind="job", body=body)
            container.children.append(node)
            self.nodes[node.path] = node
            self.parents[node.path] = container
            self.states[node.path] = NodeState()
            self._start(node, list(self.states[path].inputs or []), out)
            self.events.append(("added", node))
        return out

    # Rules ---------------------------------------------------------------

    def _start(self, node: Node, inputs: list[Any], out: list[Enqueue]) -> None:
        if node.kind == "job":
            self._set(node.path, PENDING, inputs=inputs)
            out.append(Enqueue(node, inputs))
            return
        self._set(node.path, RUNNING, inputs=inputs)
        self._reconsider(node, out)

    def _reconsider(self, container: Node, out: list[Enqueue], *, ended: Node | None = None) -> None:
        """Start or cancel the children whose dependencies ended; end the container when all did.

        ``ended``: the member that just ended -- only the siblings that depend on it, and
        on those cancelled in turn, are looked at; otherwise every member is.
        """
        if self.states[container.path].state != RUNNING:
            return
        children = container.children
        if ended is None:
            self._want(children)
            moved = True
            while moved:
                moved = any([self._follow(container, index, out) for index in range(len(children))])
        else:
            todo = [ended.path]
            while todo:
                indexes = self.shape.dependents.get(todo.pop(), [])
                self._want(children[d] for index in indexes for d in [index, *children[index].deps])
                todo += [children[index].path for index in indexes
                         if self._follow(container, index, out) and self.states[children[index].path].state in DONE]
        if self._unended(container):
            return
        self._want(children)
        member_states = [self.states[child.path].state for child in children]
        all_ok = all(state == COMPLETED for state in member_states)
        if container.kind == "batch":
            if not self._callbacks_done(container, all_ok, out):
                return
            fired = [self.states[cb.path].state for cb in container.callbacks.values()
                     if self.states[cb.path].state != SKIPPED]
            # ojs-workflows §6.4(7), §12.3 B: a batch whose callbacks ran ends
            # as they did; with none to fire it ends as its jobs did.
            ok = all(state == COMPLETED for state in fired) if fired else all_ok
        else:
            ok = all_ok
        self._set(container.path, COMPLETED if ok else FAILED)
        self.events.append((COMPLETED if ok else FAILED, container))
        parent = self.parents.get(container.path)
        if parent is not None:
            self._reconsider(parent, out, ended=container)

    def _follow(self, container: Node, index: int, out: list[Enqueue]) -> bool:
        """Start the waiting member ``index`` if its dependencies completed, cancel it if one
        ended otherwise; whether it moved."""
        children = container.children
        child = children[index]
        if self.states[child.path].state != WAITING:
            return False
        dep_states = [self.states[children[d].path].state for d in child.deps]
        if all(state == COMPLETED for state in dep_states):
            self._start(child, self._inputs(container, index), out)
            return True
        if any(state in DONE - {COMPLETED} for state in dep_states):
            self._want(child.walk())
            for sub in child.walk():
                self._set(sub.path, CANCELLED)
            return True
        return False

    def _inputs(self, container: Node, index: int) -> list[Any]:
        """The parent_results member ``index`` starts with: the container's inputs, then the result
        of every sibling it waits for, directly or not, in step order.

        The results its dependency with the most ancestors started with are taken from that
        dependency's own inputs, not read again: a chain's step reads one step before it, a
        layered DAG's the layer before, however many came earlier.
        """
        children = container.children
        given = self.states[container.path].inputs or []
        ancestors = _ancestors(children, index)
        known: dict[int, Any] = {}
        if children[index].deps:
            # The longest inputs are those of the dependency with the most ancestors.
            widest = max(children[index].deps, key=lambda dep: len(self.states[children[dep].path].inputs or []))
            inputs, lineage = self.states[children[widest].path].inputs or [], _ancestors(children, widest)
            if len(inputs) == len(given) + len(lineage):
                known = dict(zip(lineage, inputs[len(given):]))
        self._want(sub for d in ancestors if d not in known for sub in children[d].walk())
        return [*given, *(known[d] if d in known else self.result_of(children[d]) for d in ancestors)]

    def _callbacks_done(self, batch: Node, all_ok: bool, out: list[Enqueue]) -> bool:
        """Fire the callbacks the outcome calls for (once: only from waiting); True when all ended."""
        self._want(sub for child in [*batch.children, *batch.callbacks.values()] for sub in child.walk())
        results = [self.result_of(child) for child in batch.children]
        for name, callback in batch.callbacks.items():
            if self.states[callback.path].state != WAITING:
                continue
            if name == "on_complete" or (name == "on_success") == all_ok:
                self.events.append(("callback_fired", callback))
                self._start(callback, results, out)
            else:
                self._set(callback.path, SKIPPED)
        return all(self.states[cb.path].state in DONE for cb in batch.callbacks.values())

    def result_of(self, node: Node) -> Any:
        """A node's result for those after it: a job's result; a chain's last step's;
        a group's or batch's, its jobs' results in order (ojs-workflows §7.3)."""
        if node.kind == "job":
            return self.states[node.path].result
        if node.kind == "chain":
            return self.result_of(node.children[-1])
        return [self.result_of(child) for child in node.children]


def _ancestors(children: list[Node], index: int) -> list[int]:
    """Every sibling ``index`` waits for, directly or not, in step order.

    For a chain that is every step before it: ojs-workflows §7.2 says a step
    SHOULD see all earlier results.
    """
    seen: set[int] = set()
    todo = list(children[index].deps)
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(children[dep].deps)
    return sorted(seen)
