"""The docs site keeps up with the code: every setting and command has its reference entry.

The site itself is built with warnings as errors by ``tox -e docs``.
"""

from __future__ import annotations

import re
from pathlib import Path

from django_ojs.conf import DEFAULTS

DOCS = Path(__file__).resolve().parents[2] / "docs"
COMMANDS = Path(__file__).resolve().parents[2] / "django_ojs" / "management" / "commands"


def test_every_setting_has_a_row_in_the_reference():
    page = (DOCS / "reference" / "settings.md").read_text()
    rows = set(re.findall(r"^\| `([A-Z_]+)` \|", page, flags=re.MULTILINE))
    assert rows == set(DEFAULTS), f"missing: {set(DEFAULTS) - rows}; not settings: {rows - set(DEFAULTS)}"
    retention = set(re.findall(r"^\| `([a-z_]+)` \|", page, flags=re.MULTILINE))
    assert retention == set(DEFAULTS["RETENTION"])


def test_every_management_command_is_in_the_cli_reference():
    page = (DOCS / "reference" / "cli.md").read_text()
    commands = {path.stem for path in COMMANDS.glob("*.py") if not path.stem.startswith("_")}
    assert commands, "no management commands found"
    for command in commands:
        assert f"## `{command}`" in page, f"docs/reference/cli.md has no section for {command}"


def test_every_page_is_in_the_navigation():
    nav = (DOCS.parent / "mkdocs.yml").read_text()
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert {page for page in pages if page not in nav} == set()
