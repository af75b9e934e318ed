"""Job progress (ojs-progress): parsing a report, merging it, reading it back. Pure.

What the store keeps in ``Job.progress`` is one attempt's latest report::

    {"attempt": 2, "progress": 0.47, "data": {...}, "updated_at": "..."}

Everything the spec says about the lifecycle is decided when it is *read*
(``view``), so no settle path writes a progress column:

- a new attempt starts with no progress (§5.3): the stored attempt is older
  than the job's;
- a completed job reads 1.0 if progress was reported (§8.1);
- a failed, retrying or discarded job keeps its last report (§8.2).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest

# §5.2 recommends at most 4 KB of structured data per report.
MAX_DATA_BYTES = 4096
# §6.2: at most one progress event per second per job.
EVENT_INTERVAL = 1.0


@dataclass(frozen=True, slots=True)
class Report:
    """One progress update: a fraction in [0, 1] (clamped), structured data, or both."""

    progress: float | None = None
    data: dict[str, Any] | None = None


def parse(body: Any) -> Report:
    """A PUT body (or ``ctx.progress`` arguments) as a Report; InvalidRequest if unusable."""
    if not isinstance(body, dict):
        raise InvalidRequest("the progress body must be a JSON object", field="body")
    unknown = sorted(set(body) - {"progress", "data", "attempt", "worker_id", "checkpoint"})
    if unknown:
        raise InvalidRequest(f"unknown progress field {unknown[0]!r}", field=unknown[0])
    return make(body.get("progress"), body.get("data"))


def make(progress: Any = None, data: Any = None) -> Report:
    if progress is not None:
        if isinstance(progress, bool) or not isinstance(progress, (int, float)) or not math.isfinite(progress):
            raise InvalidRequest("progress must be a number between 0.0 and 1.0", field="progress")
        progress = min(max(float(progress), 0.0), 1.0)  # §5.1: clamp, never reject
    if data is not None:
        if not isinstance(data, dict):
            raise InvalidRequest("data must be a JSON object", field="data")
        try:
            size = len(json.dumps(data).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(f"data is not JSON: {exc}", field="data") from None
        if size > MAX_DATA_BYTES:
            raise InvalidRequest(f"data is {size} bytes; at most {MAX_DATA_BYTES}", field="data")
    if progress is None and data is None:
        raise InvalidRequest("a progress report needs progress, data, or both", field="progress")
    return Report(progress, data)


def merge(stored: dict[str, Any] | None, attempt: int, report: Report, stamp: str) -> dict[str, Any]:
    """The stored value after ``report`` on ``attempt``: numeric progress never goes back (§5.1)."""
    same = stored if stored is not None and stored.get("attempt") == attempt else None
    before = same.get("progress") if same else None
    progress = report.progress
    if before is not None and (progress is None or progress < before):
        progress = before
    data = report.data if report.data is not None else (same.get("data") if same else None)
    return {"attempt": attempt, "progress": progress, "data": data, "updated_at": stamp}


def view(state: str, attempt: int, stored: dict[str, Any] | None) -> dict[str, Any]:
    """What GET /jobs/{id}/progress answers for a job in ``state`` on ``attempt``."""
    if not stored or (state == "active" and stored.get("attempt") != attempt):
        return {"progress": None, "data": None, "updated_at": None}
    progress = 1.0 if state == "completed" else stored.get("progress")
    return {"progress": progress, "data": stored.get("data"), "updated_at": stored.get("updated_at")}


def percent(value: float | None) -> str:
    """``0.473`` as ``"47%"``, for pages."""
    return "" if value is None else f"{math.floor(value * 100)}%"
