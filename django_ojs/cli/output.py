"""How ``manage.py ojs`` prints: JSON for scripts, aligned columns for people (pure)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


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


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value) or "-"
    if isinstance(value, dict):
        return " ".join(f"{key}={n}" for key, n in value.items() if n) or "-"
    return str(value)
