"""Every code sample of the docs and the README runs, or is checked, or says why it cannot be.

One test per block (``README.md:185``). Python blocks run in this process
against the test database, each in a fresh namespace with the handler
registry as it was (``run``), as settings or URLs whose values are checked
(``config``), or as tests that are then run (``test``, against tests/docs/site.py).
Shell blocks are checked command by command (tests/docs/shell_checks.py);
YAML and JSON blocks are parsed, and the commands a YAML manifest runs are
checked too. The tutorial, which builds a project step by step, runs in
test_tutorial.py. The conventions are in docs/design.md, "Code samples that run".
"""

from __future__ import annotations

import importlib.util
import inspect
import io
import itertools
import json
import shutil
import subprocess
import sys
import unittest
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import pytest
import yaml
from django.urls import URLPattern, URLResolver
from django.utils.module_loading import import_string

from django_ojs.conf.defaults import DEFAULTS
from django_ojs.conf.rules import problems
from django_ojs.handlers.registry import registry

from . import samples
from .samples import ROOT, Sample, all_samples, commands, page_mode
from .shell_checks import check

ON_PAGES = [sample for sample in all_samples() if page_mode(ROOT / sample.page) == "project"]
TUTORIAL = ROOT / "docs" / "tutorial.md"


def by_lang(*langs: str) -> list[Any]:
    return [pytest.param(sample, id=sample.id, marks=database_of(sample)) for sample in ON_PAGES if sample.lang in langs]


def database_of(sample: Sample) -> list[pytest.MarkDecorator]:
    """A test sample whose tests ask for a database they commit to (``ojs_jobs_transactional``) gets one;
    the others run in a transaction rolled back at the end."""
    return [pytest.mark.django_db(transaction=True)] if sample.kind == "test" and "_transactional" in sample.code else []


def skip_if_asked(sample: Sample) -> None:
    if sample.kind == "skip":
        pytest.skip(f"not run: {sample.reason}")


# -- Python -------------------------------------------------------------------


@pytest.fixture
def tutorial_app(tmp_path: Path) -> Iterator[None]:
    """The tutorial's app ``shop`` (its jobs.py, from the page), importable; gone afterwards."""
    app = tmp_path / "shop"
    app.mkdir()
    (app / "__init__.py").write_text("")
    for sample in samples.samples_of(TUTORIAL):
        if sample.kind == "file" and sample.options["file"].startswith("shop/"):
            (tmp_path / sample.options["file"]).write_text(sample.code)
    sys.path.insert(0, str(tmp_path))
    yield
    sys.path.remove(str(tmp_path))
    for name in [name for name in sys.modules if name == "shop" or name.startswith("shop.")]:
        del sys.modules[name]


@pytest.fixture
def own_registry() -> Iterator[None]:
    """A sample registers its handlers on an empty registry; the suite's come back afterwards."""
    saved = dict(registry._handlers)
    registry._handlers.clear()
    yield
    registry._handlers.clear()
    registry._handlers.update(saved)


def chain_of(sample: Sample) -> list[Sample]:
    """The sample and those it ``continues`` (the python samples before it on its page), oldest first."""
    page = [other for other in ON_PAGES if other.page == sample.page and other.lang == "python"]
    index = page.index(sample)
    start = index
    while "continues" in page[start].flags and start > 0:
        start -= 1
    return page[start : index + 1]


def execute(sample: Sample, namespace: dict[str, Any]) -> None:
    for part, code in (("prelude", sample.prelude), ("block", sample.code)):
        if code:
            exec(compile(code, f"{sample.id} ({part})", "exec"), namespace)


def check_config(sample: Sample, namespace: dict[str, Any]) -> None:
    """What a settings or URLs fragment sets must be what Django and django-ojs accept."""
    ojs = namespace.get("OJS")
    if ojs is not None:
        assert set(ojs) <= set(DEFAULTS), f"unknown OJS keys {sorted(set(ojs) - set(DEFAULTS))}"
        assert problems(ojs) == []
    for app in namespace.get("INSTALLED_APPS", []):
        if isinstance(app, str):
            assert importlib.util.find_spec(app.split(".")[0]), f"INSTALLED_APPS names {app!r}"
    for pattern in namespace.get("urlpatterns", []):
        assert pattern is Ellipsis or isinstance(pattern, (URLPattern, URLResolver)), pattern
    for alias in namespace.get("TASKS", {}).values():
        module, _, name = alias["BACKEND"].rpartition(".")
        # Django's tasks framework (django.tasks) is Django 6's: before it, the module exists but cannot load.
        if django.VERSION >= (6,):
            import_string(alias["BACKEND"])
        else:
            assert importlib.util.find_spec(module) and f"class {name}(" in Path(importlib.util.find_spec(module).origin).read_text()
    assert "OJS" in namespace or "INSTALLED_APPS" in namespace or "urlpatterns" in namespace or "TASKS" in namespace \
        or "DATABASES" in namespace or "LOGGING" in namespace, "a config sample sets nothing Django or django-ojs reads"


def run_tests_defined(namespace: dict[str, Any], request: pytest.FixtureRequest) -> int:
    """Run the pytest functions and Django TestCase classes a ``test`` sample defines; how many ran."""
    ran = 0
    for name, value in list(namespace.items()):
        if name.startswith("test_") and inspect.isfunction(value):
            value(**{parameter: request.getfixturevalue(parameter) for parameter in inspect.signature(value).parameters})
            ran += 1
        elif inspect.isclass(value) and issubclass(value, unittest.TestCase) and value.__module__ == namespace["__name__"]:
            suite = unittest.defaultTestLoader.loadTestsFromTestCase(value)
            if suite.countTestCases():
                result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
                assert result.wasSuccessful(), [str(failure[1]) for failure in result.failures + result.errors]
                ran += suite.countTestCases()
    return ran


@pytest.mark.parametrize("sample", by_lang("python"))
def test_python(sample: Sample, request, db, own_registry, tutorial_app, settings):
    skip_if_asked(sample)
    assert sample.kind in ("run", "config", "test"), f"{sample.kind} samples belong to a page followed step by step"
    namespace: dict[str, Any] = {"__name__": "docs_sample"}
    if sample.kind == "config":
        from django.urls import include, path

        namespace.update(path=path, include=include, DATABASES={"default": {}})
        execute(sample, namespace)
        check_config(sample, namespace)
        return
    for earlier in chain_of(sample):
        execute(earlier, namespace)
    if sample.kind == "test":
        settings.ROOT_URLCONF = "tests.docs.site"
        assert run_tests_defined(namespace, request) > 0, "a test sample defines no test"


# -- Shell, YAML, JSON --------------------------------------------------------


@pytest.mark.parametrize("sample", by_lang("sh"))
def test_shell(sample: Sample):
    skip_if_asked(sample)
    assert sample.kind == "check", f"{sample.kind} shell samples belong to a page followed step by step"
    syntax = subprocess.run(["bash", "-n"], input=sample.code, capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    found = commands(sample.code)
    assert found, "a shell sample with no command"
    assert [problem for words in found for problem in check(words)] == []


def manifest_commands(document: Any) -> Iterator[list[str]]:
    """Every ``command:`` list of a Kubernetes or Compose document (``sh -c`` scripts split into commands)."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "command" and isinstance(value, list) and all(isinstance(word, str) for word in value):
                if value[:2] == ["sh", "-c"]:
                    yield from commands(value[2])
                else:
                    yield value
            else:
                yield from manifest_commands(value)
    elif isinstance(document, list):
        for item in document:
            yield from manifest_commands(item)


@pytest.mark.parametrize("sample", by_lang("yaml"))
def test_yaml(sample: Sample):
    skip_if_asked(sample)
    documents = [document for document in yaml.safe_load_all(sample.code) if document is not None]
    assert documents
    assert [problem for words in manifest_commands(documents) for problem in check(words)] == []


@pytest.mark.parametrize("sample", by_lang("json", "sql"))
def test_json_and_sql(sample: Sample):
    skip_if_asked(sample)
    json.loads(sample.code)


@pytest.mark.parametrize("sample", by_lang("nginx"))
def test_nginx(sample: Sample):
    """An nginx configuration: blocks that open and close, and directives ended with ";"."""
    skip_if_asked(sample)
    depth = 0
    for number, raw in enumerate(sample.code.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        depth += line.count("{") - line.count("}")
        assert depth >= 0, f"line {number}: a block closes that never opened"
        assert line.endswith((";", "{", "}")), f"line {number}: a directive must end with ';': {raw!r}"
    assert depth == 0, "a block is left open"


def test_every_block_is_found_and_placed():
    """The extractor reads every page; each skipped block says why, and bash is there to check syntax."""
    assert shutil.which("bash")
    everything = all_samples()
    assert len(everything) > 50
    assert all(sample.reason for sample in everything if sample.kind == "skip")


def test_what_a_tutorial_shows_a_command_printing_is_compared():
    """On a page followed step by step, a text block right after a command is what it printed
    or logged: an ``output`` block (``log=COMMAND`` for a background process's log), which the
    tutorial's test compares with what was printed, or one that says why it cannot be."""
    unchecked = []
    for page in samples.pages():
        if page_mode(page) != "workspace":
            continue
        for before, block in itertools.pairwise(samples.samples_of(page)):
            if before.kind in ("run", "background") and block.lang == "text" and block.kind != "output" \
                    and not block.reason:
                unchecked.append(f"{block.id}: shows what {before.id} prints, unchecked")
            if before.kind == "background" and block.kind == "output" and "log" not in block.options:
                unchecked.append(f"{block.id}: a background process's output is its log: output log=COMMAND")
    assert not unchecked, "\n".join(unchecked)
