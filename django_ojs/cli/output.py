"""How ``manage.py ojs`` prints: JSON for scripts, aligned columns for people (pure)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..protocol.printable import one_line


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Rows as left-aligned columns under a header; lists joined by commas, None as '-'."""
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    widths = [max([len(column), *(len(line[i]) for line in cells)]) for i, column in enumerate(columns)]
    lines = ["  ".join(column.upper().ljust(width) for column, width in zip(columns, widths, strict=True))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)) for line in cells]
    return "\n".join(line.rstrip() for line in lines)


def report_line(report: dict[str, Any], *, dry_run: bool = False) -> str:
    """One line for a bulk move: what moved, what was skipped and why."""
    if dry_run:
        return f"{report['move']}: {report['matched']} matching jobs (dry run: nothing moved)"
    text = f"{report['move']}: {report['moved']} moved in {report['batches']} batches"
    if report["skipped"]:
        reasons = ", ".join(f"{reason} ({n})" for reason, n in report["skipped_by_reason"].items())
        text += f", {report['skipped']} skipped: {reasons}"
    if report["truncated"]:
        text += f"; stopped at the {report['stopped_at']}, more jobs match"
    return text


def for_terminal(text: str) -> str:
    """``text`` with what is not printable escaped as Python writes it, line breaks kept.

    What the CLI prints comes from clients: a worker's id and hostname, a job's
    error, a step's name. An escape sequence among them (``\\x1b]0;…\\x07``, a
    colour, a cursor move) would reach the operator's terminal and run there.
    """
    return "\n".join(one_line(line) for line in text.split("\n"))


def _cell(value: Any) -> str:
    # One line per row: a line break inside a cell is escaped too.
    return one_line(_text(value))


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value) or "-"
    if isinstance(value, dict):
        return " ".join(f"{key}={n}" for key, n in value.items() if n) or "-"
    return str(value)
