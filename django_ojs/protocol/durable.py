"""Durable jobs: checkpoints (ojs-progress §6.4) and durable steps (a django-ojs extension). Pure.

A **checkpoint** is the state a handler needs to resume: a JSON object sent
with a progress report. The latest one is kept with the job across attempts;
a retry reads it as ``last_checkpoint``.

A **step** is a named unit of a handler's work whose result is recorded once
it completed: one record per step name per job. A retry finds the record and
skips the step, reading its result.

Both are bounded, as progress data is: a worker that sends a megabyte per
report would make every read of the job carry it.
"""

from __future__ import annotations

import json
from typing import Any

from .durations import format_timestamp
from .errors import InvalidRequest

# The largest checkpoint kept, serialised as compact JSON: a resume position
# and a few counters, not the work's data (store that elsewhere and keep its key).
MAX_CHECKPOINT_BYTES = 16384
# The largest result a step records, serialised the same way.
MAX_STEP_RESULT_BYTES = 16384
# A step's name: what the handler calls it ("charge", "rows:1200").
MAX_STEP_NAME_CHARS = 255


def size_of(value: Any, field: str) -> int:
    """The bytes ``value`` takes as compact JSON; InvalidRequest if it is not JSON."""
    try:
        return len(json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"{field} is not JSON: {exc}", field=field) from None


def check_checkpoint(state: Any) -> int:
    """A checkpoint's size in bytes; InvalidRequest unless it is a JSON object within the bound."""
    if not isinstance(state, dict):
        raise InvalidRequest("checkpoint must be a JSON object", field="checkpoint")
    size = size_of(state, "checkpoint")
    if size > MAX_CHECKPOINT_BYTES:
        raise InvalidRequest(f"checkpoint is {size} bytes; at most {MAX_CHECKPOINT_BYTES}", field="checkpoint")
    return size


def check_step_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequest("a step's name must be a non-empty string", field="name")
    if len(name) > MAX_STEP_NAME_CHARS:
        raise InvalidRequest(f"a step's name is at most {MAX_STEP_NAME_CHARS} characters", field="name")
    if any(ord(char) < 32 for char in name):
        raise InvalidRequest("a step's name holds no control characters", field="name")
    return name


def check_step_result(result: Any) -> int:
    """A step result's size in bytes; InvalidRequest unless it is JSON within the bound."""
    size = size_of(result, "result")
    if size > MAX_STEP_RESULT_BYTES:
        raise InvalidRequest(f"result is {size} bytes; at most {MAX_STEP_RESULT_BYTES}", field="result")
    return size


def stored_checkpoint(attempt: int, state: dict[str, Any], stamp: str) -> dict[str, Any]:
    """What ``Job.checkpoint`` holds."""
    return {"attempt": attempt, "state": state, "updated_at": stamp}


def render_checkpoint(stored: dict[str, Any] | None) -> dict[str, Any]:
    """The wire members of a job's checkpoint: ``last_checkpoint`` (the state, as §14.3 shows it),
    the attempt that sent it and when; nothing without one."""
    if not stored:
        return {}
    return {
        "last_checkpoint": stored.get("state"),
        "last_checkpoint_attempt": stored.get("attempt"),
        "last_checkpoint_at": stored.get("updated_at"),
    }


def render_step(step: Any) -> dict[str, Any]:
    """One recorded step on the wire (a ``JobStep``, or any object with its attributes)."""
    return {
        "name": step.name,
        "attempt": step.attempt,
        "result": step.result,
        "recorded_at": format_timestamp(step.recorded_at),
    }
