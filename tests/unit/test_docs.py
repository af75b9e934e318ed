"""The docs site keeps up with the code: every command has its reference entry, every page its place.

The settings reference is generated (tests/docs/test_settings_reference.py);
the site itself is built with warnings as errors by ``tox -e docs``.
"""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
COMMANDS = Path(__file__).resolve().parents[2] / "django_ojs" / "management" / "commands"


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
