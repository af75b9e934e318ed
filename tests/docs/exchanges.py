"""HTTP exchanges on the docs' pages: the request a reader sends with curl, and the reply the page shows.

A ``json`` block marked as a response is the reply to the curl command of the
``sh`` block above it on the same page (docs/design.md, "Code samples that run"):

    <!-- sample: response status=201 ID=job.id -->

``status`` is the status the reply must have; any other ``NAME=path`` keeps
a value of the reply (``job.id``, ``jobs.0.id``) as ``$NAME`` for the
requests after it on the page. A hidden prelude is Python, run in the test
process against the server's database before the request is sent; the
upper-case strings it sets are ``$NAME`` too (a job to fetch, a failed job
for the dead letter).

The reply shown is compared with the server's by shape (``shape_problems``):
the same keys, values of the same JSON types; ids and times by their pattern;
states, codes, types and other lower-case words, and booleans, exactly. A
page shortens a long reply with ``"...": "..."`` in an object (the keys shown
must be there, others may be) or ``"..."`` as a list's last item (more items
like the one before it may follow).

This module only reads and compares; tests/docs/test_http_exchanges.py sends.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .samples import Sample, commands, pages, samples_of

# What a page writes for "more keys" in an object and "more items" at the end of a list.
MORE = "..."
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
# A value a program branches on: a state, an error code, a job type, a queue or worker name.
WORD = re.compile(r"[a-z][a-z0-9_]*(?:[.:_-][a-z0-9_]+)*")


class ExchangeError(Exception):
    """A response block that cannot be paired with the request it answers."""


@dataclass
class Exchange:
    request: Sample  # the sh block with one curl command
    response: Sample  # the json block
    status: int
    captures: dict[str, str]  # NAME -> path in the reply

    @property
    def id(self) -> str:
        return self.response.id


def exchanges_of(path: Path) -> list[Exchange]:
    found: list[Exchange] = []
    request: Sample | None = None
    for sample in samples_of(path):
        if sample.lang == "sh":
            request = sample
        elif sample.lang == "json" and sample.kind == "response":
            if request is None:
                raise ExchangeError(f"{sample.id}: a response with no shell block above it")
            curls = [words for words in commands(request.code) if words[0] == "curl"]
            if len(curls) != 1:
                raise ExchangeError(f"{sample.id}: the shell block above it sends {len(curls)} curl requests, not one")
            options = dict(sample.options)
            if "status" not in options:
                raise ExchangeError(f"{sample.id}: a response says its status: <!-- sample: response status=200 -->")
            status = int(options.pop("status"))
            bad = [name for name in options if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name)]
            if bad:
                raise ExchangeError(f"{sample.id}: {bad}: what a response keeps is named in capitals (ID=job.id)")
            found.append(Exchange(request, sample, status, options))
            request = None
    return found


def pages_with_exchanges() -> list[Path]:
    return [path for path in pages() if exchanges_of(path)]


def value_at(body: Any, path: str) -> Any:
    """``job.id``, ``jobs.0.id``: the value at that path of a reply."""
    value = body
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def shape_problems(shown: Any, actual: Any, where: str = "$") -> list[str]:
    """How the server's reply differs from the one a page shows (empty when they agree)."""
    if _kind(shown) != _kind(actual):
        return [f"{where}: the page shows {_kind(shown)} {json.dumps(shown)[:60]}, the server sent {_kind(actual)} "
                f"{json.dumps(actual)[:60]}"]
    if isinstance(shown, dict):
        keys = set(shown) - {MORE}
        problems = [f"{where}.{key}: shown, not sent" for key in sorted(keys - set(actual))]
        if MORE not in shown:
            problems += [f"{where}.{key}: sent, not shown" for key in sorted(set(actual) - keys)]
        for key in sorted(keys & set(actual)):
            problems += shape_problems(shown[key], actual[key], f"{where}.{key}")
        return problems
    if isinstance(shown, list):
        more = bool(shown) and shown[-1] == MORE
        items = shown[:-1] if more else shown
        if len(actual) < len(items) or (not more and len(actual) != len(items)):
            return [f"{where}: the page shows {len(items)} items{' or more' if more else ''}, the server sent {len(actual)}"]
        problems = []
        for index, value in enumerate(actual):
            if index < len(items):
                problems += shape_problems(items[index], value, f"{where}[{index}]")
            elif items:
                problems += shape_problems(items[-1], value, f"{where}[{index}]")
        return problems
    if isinstance(shown, str):
        if UUID.search(shown):  # an id, or a word around one (evt_<uuid>): the rest must be the same
            if not UUID.search(actual):
                return [f"{where}: the page shows an id, the server sent {actual!r}"]
            shown, actual = UUID.sub("id", shown), UUID.sub("id", actual)
        if TIMESTAMP.fullmatch(shown):
            return [] if TIMESTAMP.fullmatch(actual) else [f"{where}: the page shows a time, the server sent {actual!r}"]
        if WORD.fullmatch(shown) and shown != actual:
            return [f"{where}: the page shows {shown!r}, the server sent {actual!r}"]
        return []
    if isinstance(shown, bool) and shown != actual:
        return [f"{where}: the page shows {json.dumps(shown)}, the server sent {json.dumps(actual)}"]
    return []


def as_shown(shown: Any, actual: Any) -> Any:
    """The server's reply cut as the page cuts it: the keys an object with ``"..."`` shows, a list's shown items."""
    if isinstance(shown, dict) and isinstance(actual, dict):
        if MORE not in shown:
            return {key: as_shown(shown.get(key), value) for key, value in actual.items()}
        cut = {key: as_shown(shown[key], actual[key]) for key in shown if key != MORE and key in actual}
        return {**cut, MORE: MORE}
    if isinstance(shown, list) and isinstance(actual, list):
        if shown and shown[-1] == MORE:
            items = shown[:-1]
            kept = [as_shown(items[min(index, len(items) - 1)] if items else None, value)
                    for index, value in enumerate(actual[: max(len(items), 1)])]
            return [*kept, MORE]
        return [as_shown(shown[index] if index < len(shown) else None, value) for index, value in enumerate(actual)]
    return actual


def format_json(value: Any, indent: int = 0, width: int = 92, lead: int = 0) -> str:
    """JSON as the pages write it: a value on one line when it fits, else one member per line.

    ``lead`` is how much of the line is taken before the value (its key).
    """
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, (dict, list)) or not value or indent + lead + len(flat) <= width:
        return flat
    inner = " " * (indent + 2)
    if isinstance(value, dict):
        members = []
        for key, item in value.items():
            name = json.dumps(key, ensure_ascii=False)
            members.append(f"{inner}{name}: {format_json(item, indent + 2, width, len(name) + 2)}")
        return "{\n" + ",\n".join(members) + "\n" + " " * indent + "}"
    members = [f"{inner}{format_json(item, indent + 2, width)}" for item in value]
    return "[\n" + ",\n".join(members) + "\n" + " " * indent + "]"


def rewrite(path: Path, replies: dict[int, Any]) -> None:
    """Write these replies into the response blocks opening at these lines (1-based) of a page."""
    lines = path.read_text().splitlines()
    blocks = {sample.line: sample for sample in samples_of(path)}
    for line in sorted(replies, reverse=True):
        sample = blocks[line]
        body = sample.code.rstrip("\n").split("\n")
        lines[line : line + len(body)] = format_json(replies[line]).split("\n")
    path.write_text("\n".join(lines) + "\n")
