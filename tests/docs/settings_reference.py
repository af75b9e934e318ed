"""Write the settings reference (docs/reference/settings.md) from the settings' own definitions.

    python -m tests.docs.settings_reference           # rewrite the page
    python -m tests.docs.settings_reference --check   # exit 1 if the page is stale

Everything below the page's marker line is generated: one table per section of
``django_ojs/conf/defaults.py`` (its ``# -- Section --`` lines), one row per
setting with the type its rule in ``conf/rules.py`` accepts, its default and
the comment right above it; a setting whose default is a dict with commented
keys (``RETENTION``) gets a table of its keys. The prose above the marker is
written by hand. ``tests/docs/test_settings_reference.py`` fails when the
committed page differs from what this writes, so a new setting needs only its
default, its comment and its rule, and a run of this module.

Generated (rather than rendered by an mkdocs hook) so that the page reads the
same on the repository's web view as on the site, and a change to a default or
its wording shows up in review as a change to the page.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django_ojs.conf.defaults import DEFAULTS
from django_ojs.conf.rules import RULES, Rule, retention_key

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "django_ojs" / "conf" / "defaults.py"
PAGE = ROOT / "docs" / "reference" / "settings.md"
MARKER = (
    "<!-- Generated below from django_ojs/conf/defaults.py and conf/rules.py by "
    "`python -m tests.docs.settings_reference`: edit those, not this page. -->"
)
SECTION = re.compile(r"^\s*# -- (?P<title>.+?) -+\s*$")
COMMENT = re.compile(r"^\s*#\s?(?P<text>.*)$")
# Rules for keys inside a dict setting, by setting.
KEY_RULES = {"RETENTION": retention_key}


@dataclass
class Entry:
    name: str
    comment: str
    section: str
    keys: list[Entry]


class UndocumentedSetting(Exception):
    pass


def _comment_above(lines: list[str], line: int) -> str:
    """The comment lines right above source line ``line`` (1-based), joined; a section line ends them."""
    texts: list[str] = []
    index = line - 2
    while index >= 0 and (comment := COMMENT.match(lines[index])) and not SECTION.match(lines[index]):
        texts.insert(0, comment["text"].strip())
        index -= 1
    return " ".join(text for text in texts if text)


def _entries(node: ast.Dict, lines: list[str], where: str) -> list[Entry]:
    sections = [(number, match["title"]) for number, text in enumerate(lines, start=1) if (match := SECTION.match(text))]
    entries = []
    for key, value in zip(node.keys, node.values):
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            raise UndocumentedSetting(f"{where}: a key that is not a string literal, line {getattr(key, 'lineno', '?')}")
        comment = _comment_above(lines, key.lineno)
        if not comment:
            raise UndocumentedSetting(f"{where}[{key.value!r}] (line {key.lineno}) has no comment above it")
        section = next((title for number, title in reversed(sections) if number < key.lineno), "")
        keys = _entries(value, lines, f"{where}[{key.value!r}]") if isinstance(value, ast.Dict) and value.keys else []
        entries.append(Entry(key.value, comment, section, keys))
    return entries


def settings_entries(source: str | None = None) -> list[Entry]:
    """Every setting of ``DEFAULTS`` as written in defaults.py, in order, with its comment and section."""
    text = SOURCE.read_text() if source is None else source
    lines = text.splitlines()
    for statement in ast.parse(text).body:
        target = statement.target if isinstance(statement, ast.AnnAssign) else (
            statement.targets[0] if isinstance(statement, ast.Assign) else None
        )
        if isinstance(target, ast.Name) and target.id == "DEFAULTS" and isinstance(statement.value, ast.Dict):
            return _entries(statement.value, lines, "DEFAULTS")
    raise UndocumentedSetting("defaults.py assigns no DEFAULTS dict")


def literal(value: Any) -> str:
    """A default as Python writes it, JSON-like for containers: `True`, `"default"`, `["a", "b"]`, `{}`."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


def gloss(name: str, value: Any, rule: Rule) -> str:
    """What a large default means, in words: `(1 MiB)`, `(7 days)`."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return ""
    if name.endswith("_BYTES") and value % (1024 * 1024) == 0:
        return f" ({value // (1024 * 1024)} MiB)"
    if rule.is_duration and value >= 86400 and value % 86400 == 0:
        days = value // 86400
        return f" ({days} day{'s' if days > 1 else ''})"
    return ""


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def default_cell(name: str, value: Any, rule: Rule) -> str:
    # A dict whose keys have rules of their own gets a table of them; another (a retry policy) is shown whole.
    if isinstance(value, dict) and value and name in KEY_RULES:
        return "below"
    return f"`{literal(value)}`{gloss(name, value, rule)}"


def row(name: str, rule: Rule, value: Any, comment: str) -> str:
    return f"| `{name}` | {cell(rule.accepts)} | {cell(default_cell(name, value, rule))} | {cell(comment)} |"


def tables(entries: list[Entry]) -> str:
    out: list[str] = []
    section = None
    table_open = False
    for entry in entries:
        rule = RULES.get(entry.name)
        if rule is None:
            raise UndocumentedSetting(f"{entry.name} has no rule in conf/rules.py")
        if entry.section != section:
            section = entry.section
            out += ["", f"## {section}"]
            table_open = False
        if not table_open:
            out += ["", "| setting | type | default | meaning |", "| --- | --- | --- | --- |"]
            table_open = True
        value = DEFAULTS[entry.name]
        out.append(row(entry.name, rule, value, entry.comment))
        if entry.keys and entry.name in KEY_RULES:
            key_rule = KEY_RULES[entry.name]
            out += ["", f"`{entry.name}` keys:", "", "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
            out += [row(key.name, key_rule(key.name), value[key.name], key.comment) for key in entry.keys]
            table_open = False
    return "\n".join(out).rstrip() + "\n"


def render(page: str | None = None) -> str:
    """The page: its hand-written part, the marker, and the generated tables."""
    text = PAGE.read_text() if page is None else page
    head, found, _ = text.partition(MARKER)
    if not found:
        raise UndocumentedSetting(f"{PAGE.relative_to(ROOT)} has no marker line: {MARKER}")
    return head + MARKER + "\n" + tables(settings_entries())


def main(argv: list[str]) -> int:
    fresh = render()
    if "--check" in argv:
        if PAGE.read_text() != fresh:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python -m tests.docs.settings_reference", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(fresh)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
