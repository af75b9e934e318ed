"""The gunicorn configuration docs/how-to/serving.md gives a reader is the example project's.

The page shows it whole, for the reader's project (an installed django-ojs has
no example project); example_project/gunicorn.conf.py says why at each value,
and the demo and tests/api/test_keepalive.py run through it. Both are run as
gunicorn runs a configuration file, and set the same values but ``wsgi_app``.
"""

from __future__ import annotations

import os
from types import CodeType
from typing import Any

import pytest
from gunicorn.config import KNOWN_SETTINGS

from .samples import ROOT, samples_of

PAGE = ROOT / "docs" / "how-to" / "serving.md"
EXAMPLE = ROOT / "example_project" / "gunicorn.conf.py"
SETTINGS = {setting.name for setting in KNOWN_SETTINGS}


def gunicorn_settings(code: str, name: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__file__": name}
    exec(compile(code, name, "exec"), namespace)
    return {key: comparable(value) for key, value in namespace.items() if key in SETTINGS}


def comparable(value: Any) -> Any:
    """A hook (a function) as what it does: its code, not the function object each file made."""
    code = value if isinstance(value, CodeType) else getattr(value, "__code__", None)
    return value if code is None else (code.co_code, [comparable(const) for const in code.co_consts])


def test_the_page_gives_the_example_projects_configuration(monkeypatch: pytest.MonkeyPatch):
    for variable in ("WEB_CONCURRENCY", "GUNICORN_THREADS", "GUNICORN_LOG_LEVEL"):
        monkeypatch.delenv(variable, raising=False)
    [block] = [sample for sample in samples_of(PAGE) if sample.code.startswith("# gunicorn.conf.py")]
    given = gunicorn_settings(block.code, block.id)
    example = gunicorn_settings(EXAMPLE.read_text(), str(EXAMPLE))
    assert given.pop("wsgi_app") == "mysite.wsgi:application"
    assert example.pop("wsgi_app") == "example_project.wsgi:application"
    assert given == example
    assert given["workers"] == len(os.sched_getaffinity(0))
