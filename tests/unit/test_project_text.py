"""The project's text speaks of the project: no tracker numbers, no talk of how the work was organised.

Code, docs, tests, README and CHANGELOG are read by people who never saw the
tracker or the working sessions behind a change: "issue 10" or "the third
session" tells them nothing, and goes stale the day the tracker moves. Say
what the thing is and why, instead. Each pattern below carries its reason.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".md", ".toml", ".ini", ".cfg", ".txt", ".yml", ".yaml", ".html", ".css", ".js", ".sh", ""}

# (pattern, why it has no place in the project's text). This file is left out
# of the scan: its examples must match.
FORBIDDEN = [
    (r"\b(?:issue|ticket|bug|PR|pull request)s?\s*#?\d+", "a tracker number: say what the change does instead"),
    (r"\bitem [0-9]+ of\b|\b[Ii]ssue\b.{0,20}\bitem [0-9]+", "a numbered point of a tracker entry"),
    (r"\b(?:first|second|third|fourth|fifth|sixth|previous|earlier|next|last) session\b", "a working session: the reader never saw it"),
    (r"\b[Ss]top [0-9]+\b", "a numbered stop of a working session"),
    (r"\b[Tt]he brief\b|\b[Tt]he lead's\b|\b[Pp]er the lead\b", "instructions to a developer, not a fact about the project"),
    (r"\b[Tt]his branch\b|\bbranch `", "a development branch: gone once merged"),
    (r"\b[Dd]one when\b", "a tracker entry's acceptance line"),
]


def project_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        names = [name for name in listed.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked sdist)
        names = [str(path.relative_to(ROOT)) for path in ROOT.rglob("*") if path.is_file() and ".git" not in path.parts]
    here = Path(__file__).resolve()
    return [
        ROOT / name for name in names
        if Path(name).suffix in TEXT_SUFFIXES and (ROOT / name).is_file() and (ROOT / name).resolve() != here
    ]


def test_no_tracker_numbers_or_session_talk():
    found = []
    for path in project_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for pattern, reason in FORBIDDEN:
            for match in re.finditer(pattern, text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {match[0]!r}: {reason}")
    assert not found, "\n".join(found)


def test_the_patterns_catch_what_they_are_for():
    examples = [
        "as issue 10 asked", "(issue 11 item 4)", "see #12 and PR 7", "measured in the third session",
        "stop 17 of the plan", "the brief's document", "Measured by the lead's command", "after: this branch",
        'its "done when"',
    ]
    for example in examples:
        assert any(re.search(pattern, example) for pattern, _ in FORBIDDEN), example
    for fine in ["a PostgreSQL session of its own", "ojs-http-binding#16-error-handling", "stop fetching", "a branch of the tree"]:
        assert not any(re.search(pattern, fine) for pattern, _ in FORBIDDEN), fine
