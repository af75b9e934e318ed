"""Type-check the typed-jobs API with mypy and pyright: what must pass passes, what must fail fails.

Run from the repository root (tox -e typecheck does): ``python tests/typecheck/check.py``.

- ``must_pass.py`` type-checks cleanly under both checkers.
- ``must_fail.py``: every line marked ``# E: <text>`` gets an error from both,
  mypy's containing the text (pyright's wording is its own and changes between
  releases: any error on the line counts); no other line gets one.
- ``installed.py``, checked from a directory outside the checkout, sees the
  package as installed (``pip install -e .`` included): the checkers find
  ``django_ojs`` and report the one marked mistake, not a missing module.

mypy reads its configuration (django-stubs plugin included) from pyproject.toml;
pyright runs with its defaults, as a project that installs django-ojs would.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARK = re.compile(r"#\s*E:\s*(.+)$")
REPORTED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.+?)(\s+\[[a-z-]+\])?$")

Errors = dict[int, list[str]]


def mypy(path: Path, cwd: Path) -> tuple[int, Errors, str]:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--show-traceback", str(path)],
        cwd=cwd, capture_output=True, text=True,
    )
    found: Errors = {}
    for line in done.stdout.splitlines():
        match = REPORTED.match(line)
        if match:
            found.setdefault(int(match["line"]), []).append(match["message"])
    return done.returncode, found, done.stdout + done.stderr


def pyright(path: Path, cwd: Path) -> tuple[int, Errors, str]:
    # The PyPI wrapper (the `pyright` package) runs the checker with node.
    done = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable, str(path)],
        cwd=cwd, capture_output=True, text=True,
    )
    found: Errors = {}
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return done.returncode or 2, found, done.stdout + done.stderr
    for diagnostic in report.get("generalDiagnostics", []):
        if diagnostic["severity"] == "error":
            line = diagnostic["range"]["start"]["line"] + 1  # pyright counts lines from 0
            found.setdefault(line, []).append(diagnostic["message"])
    return done.returncode, found, done.stdout + done.stderr


CHECKERS = {"mypy": mypy, "pyright": pyright}


def marked_lines(path: Path) -> dict[int, str]:
    return {
        number: match[1].strip()
        for number, text in enumerate(path.read_text().splitlines(), start=1)
        if (match := MARK.search(text))
    }


def check_rejections(name: str, found: Errors, path: Path, *, exact: bool) -> list[str]:
    """Every marked line has an error (whose text matches, when ``exact``); no other line has one."""
    expected = marked_lines(path)
    problems = []
    if not expected:
        problems.append(f"{path.name} marks no line")
    for number, wanted in expected.items():
        messages = found.get(number, [])
        if not messages or (exact and not any(wanted in message for message in messages)):
            problems.append(f"{path.name}:{number}: {name} should reject it ({wanted!r}); it said {messages}")
    for number in sorted(set(found) - set(expected)):
        problems.append(f"{path.name}:{number}: {name} reports an unexpected error {found[number]}")
    return problems


def main() -> int:
    root = Path.cwd()
    problems: list[str] = []
    for name, checker in CHECKERS.items():
        code, found, output = checker(HERE / "must_pass.py", root)
        if found:
            problems += [f"must_pass.py:{line}: {name} says {messages}" for line, messages in sorted(found.items())]
        elif code != 0:
            problems.append(f"must_pass.py: {name} failed:\n  " + "\n  ".join(output.splitlines()))
        code, found, output = checker(HERE / "must_fail.py", root)
        if code == 0:
            problems.append(f"must_fail.py passes {name}: the typed API checks nothing")
        problems += check_rejections(name, found, HERE / "must_fail.py", exact=name == "mypy")
        # Outside the checkout only the installed package can be found.
        with tempfile.TemporaryDirectory() as outside:
            copy = Path(shutil.copy(HERE / "installed.py", outside))
            code, found, output = checker(copy, Path(outside))
            problems += check_rejections(f"{name} (outside the checkout)", found, copy, exact=name == "mypy")

    if problems:
        print("\n".join(problems))
        return 1
    count = len(marked_lines(HERE / "must_fail.py"))
    print(
        f"typed jobs, mypy and pyright: must_pass.py clean; must_fail.py rejected on all {count} marked lines; "
        "the installed package is seen from outside the checkout"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
