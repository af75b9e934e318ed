"""The import contract: the package's layers, read from its source (docs/design.md, "Layers").

Imports run one way, from the protocol up to the face::

    protocol   the Open Job Spec as Python: pure, no Django
    conf       the settings, their defaults and their rules
    store      the models and the API keys
    signals    lifecycle events as Django signals (the core sends them)
    core       every state change, the shared reads, the PostgreSQL engine
    observe    metrics, tracing, outage logging
    producers  the in-process doors producers use: handlers, enqueue, canvas, Django's tasks
    doors      the HTTP API, the admin, the worker, the reaper, the CLI, the test helpers
    face       the package's public names, its app config, URLs and system checks

A module may import its own layer and the layers below it, never one above.
The doors do not import each other, but for the few pairs listed with their
reason. There is no import cycle between modules, and an import made inside a
function -- where one is unavoidable -- says why in a comment, and stays rare.

This reads the source with ``ast``: no import runs, so it needs no settings.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "django_ojs"

LAYERS = ("protocol", "conf", "store", "signals", "core", "observe", "producers", "doors", "face")

# Module name prefix (after "django_ojs.") -> layer, the longest prefix first.
PLACES = {
    "protocol": "protocol",
    "version": "protocol",
    "conf.checks": "doors",  # Django's system checks: what the settings and the handlers say
    "conf": "conf",
    "models": "store",
    "keys": "store",
    "observe.signals": "signals",
    "core": "core",
    "observe": "observe",
    "handlers": "producers",
    "producer": "producers",
    "canvas": "producers",
    "tasks": "producers",
    "api": "doors",
    "admin": "doors",
    "worker": "doors",
    "reaper": "doors",
    "cli": "doors",
    "management": "doors",
    "testing": "doors",
    "apps": "face",
    "urls": "face",
    "errors": "face",
    "signals": "face",
    "": "face",  # django_ojs/__init__.py
}

# Doors that use another door, and why.
DOOR_TO_DOOR = {
    ("testing", "worker"): "the test helpers run a handler as the worker does (its failure reports)",
    ("management", "cli"): "manage.py ojs is the CLI's command",
    ("management", "worker"): "manage.py ojs_worker starts the worker",
    ("management", "reaper"): "manage.py ojs_reaper starts the reaper",
    ("management", "conf"): "ojs_worker runs the system checks, minus the one it judges itself",
}

# The one import against the layers: the models' managers offer the core's
# operations as methods (Job.objects.push()), and reach them at call time.
UPWARD = {("django_ojs.models", "django_ojs.core.operations")}

MAX_FUNCTION_LEVEL_IMPORTS = 40


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, "django_ojs.x.y"
    target: str  # the imported module
    line: int
    in_function: bool
    explained: bool  # a comment on the line or the line above


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {
    module_name(path): path for path in PACKAGE.rglob("*.py") if "migrations" not in path.parts
}


def imports_of(name: str, path: Path) -> list[Import]:
    source = path.read_text()
    lines = source.splitlines()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[Import] = []

    def resolve(node: ast.ImportFrom) -> list[str]:
        if node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        if not (module == "django_ojs" or module.startswith("django_ojs.")):
            return []
        # "from package import submodule" imports the submodule; anything else, the module.
        return [f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module for alias in node.names]

    class Visitor(ast.NodeVisitor):
        depth = 0

        def visit_FunctionDef(self, node: ast.AST) -> None:
            self.depth += 1
            self.generic_visit(node)
            self.depth -= 1

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_If(self, node: ast.If) -> None:
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            ):
                return  # read by type checkers only
            self.generic_visit(node)

        def note(self, node: ast.stmt, targets: list[str]) -> None:
            here = lines[node.lineno - 1]
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            explained = "#" in here or above.startswith("#")
            for target in dict.fromkeys(targets):
                if target != name:
                    found.append(Import(name, target, node.lineno, self.depth > 0, explained))

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            self.note(node, resolve(node))

        def visit_Import(self, node: ast.Import) -> None:
            self.note(node, [alias.name for alias in node.names if alias.name.startswith("django_ojs")])

    Visitor().visit(ast.parse(source))
    return found


IMPORTS = [found for name, path in sorted(MODULES.items()) for found in imports_of(name, path)]


def layer_of(module: str) -> str:
    inside = module.removeprefix("django_ojs").removeprefix(".")
    for prefix in sorted(PLACES, key=len, reverse=True):
        if inside == prefix or inside.startswith(prefix + ".") or prefix == "":
            return PLACES[prefix]
    raise AssertionError(module)


def door_of(module: str) -> str:
    return module.split(".")[1]


def test_every_module_has_a_layer():
    assert {layer_of(module) for module in MODULES} <= set(LAYERS)


def test_imports_run_from_the_protocol_up_to_the_face():
    wrong = []
    for found in IMPORTS:
        source, target = layer_of(found.source), layer_of(found.target)
        if LAYERS.index(target) > LAYERS.index(source) and (found.source, found.target) not in UPWARD:
            wrong.append(f"{found.source}:{found.line} ({source}) imports {found.target} ({target})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_doors_do_not_import_each_other_but_for_the_listed_pairs():
    wrong = []
    for found in IMPORTS:
        if layer_of(found.source) == layer_of(found.target) == "doors":
            pair = (door_of(found.source), door_of(found.target))
            if pair[0] != pair[1] and pair not in DOOR_TO_DOOR:
                wrong.append(f"{found.source}:{found.line} imports {found.target}")
    assert not wrong, "\n".join(wrong)


def test_the_protocol_imports_no_django():
    impure = []
    for name, path in MODULES.items():
        if layer_of(name) != "protocol":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            modules = (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                else [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            )
            impure += [f"{name}: {module}" for module in modules if module.split(".")[0] in ("django", "rest_framework")]
    assert not impure


def test_no_import_cycle_between_modules():
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for found in IMPORTS:
        if not found.in_function and found.target in graph:
            graph[found.source].add(found.target)
    cycles = _strongly_connected(graph)
    assert not cycles, f"import cycles: {cycles}"


def test_imports_inside_functions_are_few_and_each_says_why():
    inside = [found for found in IMPORTS if found.in_function]
    unexplained = [f"{found.source}:{found.line} imports {found.target}" for found in inside if not found.explained]
    assert not unexplained, "an import inside a function needs a comment saying why:\n" + "\n".join(unexplained)
    statements = {(found.source, found.line) for found in inside}
    assert len(statements) <= MAX_FUNCTION_LEVEL_IMPORTS


@pytest.mark.parametrize(
    ("module", "layer"),
    [("django_ojs.protocol.states", "protocol"), ("django_ojs.core.pg.claim", "core"), ("django_ojs.conf.checks", "doors"),
     ("django_ojs.observe.signals", "signals"), ("django_ojs.api.workers", "doors"), ("django_ojs", "face")],
)
def test_the_layers_are_read_as_documented(module, layer):
    assert layer_of(module) == layer


def test_the_contract_sees_a_wrong_import():
    """The check itself can fail: a core module importing a door is reported."""
    fake = Import("django_ojs.core.push", "django_ojs.api.jobs", 1, False, False)
    assert LAYERS.index(layer_of(fake.target)) > LAYERS.index(layer_of(fake.source))
    assert _strongly_connected({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: every group of modules that import one another, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for successor in graph[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups, key=len, reverse=True)
