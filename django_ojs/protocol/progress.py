"""Job progress (ojs-progress): parsing a report, merging it, reading it back. Pure.

What the store keeps in ``Job.progress`` is one attempt's latest report::

    {"attempt": 2, "progress": 0.47, "data": {...}, "message": "...",
     "updated_at": "...", "event_at": "..."}

(``event_at``: when this attempt's last ``job.progress`` event was recorded.)

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

from .durable import check_checkpoint
from .errors import InvalidRequest

# §5.2 recommends at most 4 KB of structured data per report.
MAX_DATA_BYTES = 4096
# A status line ("uploading part 3 of 8"), not a log: longer is a 400.
MAX_MESSAGE_CHARS = 1024
# Fractions whose crossing records a job.progress event whatever the interval,
# so the event history keeps the moments a person asks about ("when was it half done?").
MILESTONES = (0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True, slots=True)
class Report:
    """One progress update: a fraction in [0, 1] (clamped), structured data, a message, a checkpoint (§6.4)."""

    progress: float | None = None
    data: dict[str, Any] | None = None
    message: str | None = None
    checkpoint: dict[str, Any] | None = None
    # The checkpoint's size as compact JSON (bounded by durable.MAX_CHECKPOINT_BYTES).
    checkpoint_bytes: int = 0

    @property
    def reports_progress(self) -> bool:
        """Whether it says how far along the attempt is: a checkpoint alone does not."""
        return self.progress is not None or self.data is not None or self.message is not None


def parse(body: Any) -> Report:
    """A PUT body as a Report; InvalidRequest if unusable.

    Members other than ``progress``, ``data``, ``message`` and ``checkpoint``
    are ignored, not refused: an SDK that sends one this server does not know
    (a newer spec's) must still be heard (§4, fire-and-forget). A known member
    of the wrong type is refused: it is a bug in the worker, and a 400 tells it.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the progress body must be a JSON object", field="body")
    return make(body.get("progress"), body.get("data"), body.get("message"), body.get("checkpoint"))


def make(progress: Any = None, data: Any = None, message: Any = None, checkpoint: Any = None) -> Report:
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
    if message is not None:
        if not isinstance(message, str):
            raise InvalidRequest("message must be a string", field="message")
        if len(message) > MAX_MESSAGE_CHARS:
            raise InvalidRequest(
                f"message is {len(message)} characters; at most {MAX_MESSAGE_CHARS}", field="message"
            )
    checkpoint_bytes = 0 if checkpoint is None else check_checkpoint(checkpoint)
    if progress is None and data is None and message is None and checkpoint is None:
        raise InvalidRequest("a progress report needs progress, data, message or checkpoint", field="progress")
    return Report(progress, data, message, checkpoint, checkpoint_bytes)


def combine(earlier: Report, later: Report) -> Report:
    """Two reports of one attempt as the one a store would end with: the higher fraction, the latest data and message."""
    best = later.progress if earlier.progress is None else max(earlier.progress, later.progress or 0.0)
    return Report(
        best,
        later.data if later.data is not None else earlier.data,
        later.message if later.message is not None else earlier.message,
    )


def current(stored: dict[str, Any] | None, attempt: int) -> dict[str, Any] | None:
    """The stored report if it belongs to ``attempt``, else None (an older attempt's)."""
    return stored if stored is not None and stored.get("attempt") == attempt else None


def merge(stored: dict[str, Any] | None, attempt: int, report: Report, stamp: str) -> dict[str, Any]:
    """The stored value after ``report`` on ``attempt``: numeric progress never goes back (§5.1);
    data and message stay until a report replaces them."""
    same = current(stored, attempt)
    before = same.get("progress") if same else None
    progress = report.progress
    if before is not None and (progress is None or progress < before):
        progress = before
    data = report.data if report.data is not None else (same.get("data") if same else None)
    message = report.message if report.message is not None else (same.get("message") if same else None)
    merged = {"attempt": attempt, "progress": progress, "data": data, "message": message, "updated_at": stamp}
    if same and same.get("event_at"):
        merged["event_at"] = same["event_at"]
    return merged


def crossed(before: float | None, after: float | None) -> float | None:
    """The highest milestone that ``before`` -> ``after`` crossed, or None."""
    if after is None:
        return None
    start = before or 0.0
    passed = [mark for mark in MILESTONES if start < mark <= after]
    return passed[-1] if passed else None


def event_due(before: dict[str, Any] | None, after: dict[str, Any], since_event: float | None, interval: float) -> bool:
    """Whether the report that made ``after`` records a ``job.progress`` event.

    ``before`` is the attempt's previous report (None: this is its first),
    ``since_event`` the seconds since its last event (None: none yet). An
    event for the first report, for each milestone crossed, and otherwise at
    most one per ``interval``: the stored value is always the latest; events
    are the history, and a report a second must not bury the job's claims
    and failures in it.
    """
    if before is None or since_event is None:
        return True
    if crossed(before.get("progress"), after.get("progress")) is not None:
        return True
    return since_event >= interval


def view(state: str, attempt: int, stored: dict[str, Any] | None) -> dict[str, Any]:
    """What GET /jobs/{id}/progress answers for a job in ``state`` on ``attempt``."""
    if not stored or (state == "active" and stored.get("attempt") != attempt):
        return {"progress": None, "data": None, "message": None, "updated_at": None}
    progress = 1.0 if state == "completed" else stored.get("progress")
    return {
        "progress": progress,
        "data": stored.get("data"),
        "message": stored.get("message"),
        "updated_at": stored.get("updated_at"),
    }


def aggregate(kind: str, steps: list[tuple[str, float | None]]) -> float | None:
    """A workflow's (or a nested container's) progress from its steps' ``(state, progress)`` (§9.1).

    A batch: completed steps / steps. A chain: (completed steps + the current
    step's progress) / steps, which is the mean of every step's progress when
    a completed step counts 1.0 and one not begun 0.0; a group (and a DAG,
    which §9.1 does not name) is that mean too. A step that reported nothing
    counts 0.0. Rounded to four places: a fraction, not a measurement.
    """
    if not steps:
        return None
    if kind == "batch":
        share = sum(1 for state, _ in steps if state == "completed") / len(steps)
    else:
        share = sum(1.0 if state == "completed" else (progress or 0.0) for state, progress in steps) / len(steps)
    return round(share, 4)


def percent(value: float | None) -> str:
    """``0.473`` as ``"47%"``, for pages."""
    return "" if value is None else f"{math.floor(value * 100)}%"
