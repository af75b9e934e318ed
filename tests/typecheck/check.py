"""Type-check the typed-jobs API: must_pass.py passes, must_fail.py fails exactly where marked.

Run from the repository root (tox -e typecheck does): ``python tests/typecheck/check.py``.
mypy reads its configuration (django-stubs plugin included) from pyproject.toml.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARK = re.compile(r"#\s*E:\s*(.+)$")
REPORTED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.+?)(\s+\[[a-z-]+\])?$")


def mypy(path: Path) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--show-traceback", str(path.relative_to(Path.cwd()))],
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout.splitlines()


def errors_by_line(lines: list[str]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for line in lines:
        match = REPORTED.match(line)
        if match:
            found.setdefault(int(match["line"]), []).append(match["message"])
    return found


def main() -> int:
    problems: list[str] = []
    code, output = mypy(HERE / "must_pass.py")
    if code != 0:
        problems.append("must_pass.py does not type-check:\n  " + "\n  ".join(output))

    code, output = mypy(HERE / "must_fail.py")
    reported = errors_by_line(output)
    expected = {
        number: MARK.search(text)[1].strip()
        for number, text in enumerate((HERE / "must_fail.py").read_text().splitlines(), start=1)
        if MARK.search(text)
    }
    if code == 0 or not expected:
        problems.append("must_fail.py type-checks: the typed enqueue checks nothing")
    for number, wanted in expected.items():
        if not any(wanted in message for message in reported.get(number, [])):
            problems.append(f"must_fail.py:{number}: expected {wanted!r}, mypy said {reported.get(number, [])}")
    for number in sorted(set(reported) - set(expected)):
        problems.append(f"must_fail.py:{number}: unexpected error {reported[number]}")

    if problems:
        print("\n".join(problems))
        return 1
    print(f"typed jobs: must_pass.py clean; must_fail.py rejected on all {len(expected)} marked lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
