"""The error a worker reports on FAIL, normalised (pure).

The core spec's error object is ``{type, message, backtrace}`` (ojs-core §8.1);
the HTTP binding's NACK sends ``{code, message, retryable, details}`` (§10.3);
ojs-retry §7 adds handler response codes. ``parse_failure`` accepts all of
them; the stored error keeps both ``type`` and ``code``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidRequest
from .retry import HANDLER_CODES

# ojs-core §8.1: at most 50 frames, at most 10,000 characters in all.
MAX_BACKTRACE_FRAMES = 50
MAX_BACKTRACE_CHARS = 10_000
MAX_MESSAGE_CHARS = 10_000


@dataclass(frozen=True)
class Failure:
    type: str
    message: str
    code: str = ""
    retryable: bool | None = None
    backtrace: list[str] = field(default_factory=list)
    details: dict[str, Any] | None = None

    @property
    def handler_code(self) -> str | None:
        """A retry-overriding response code (ojs-retry §7), if the worker sent one."""
        return self.code if self.code in HANDLER_CODES else None

    @property
    def match_candidates(self) -> tuple[str | None, ...]:
        """Strings matched against ``non_retryable_errors``: the type, the code,
        and the binding's ``details.error_class``."""
        error_class = (self.details or {}).get("error_class")
        return (self.type, self.code or None, error_class if isinstance(error_class, str) else None)

    def as_dict(self, attempt: int, occurred_at: str) -> dict[str, Any]:
        """The job's ``error`` attribute (most recent error)."""
        out: dict[str, Any] = {"type": self.type, "code": self.code or self.type, "message": self.message}
        if self.retryable is not None:
            out["retryable"] = self.retryable
        if self.backtrace:
            out["backtrace"] = self.backtrace
        if self.details:
            out["details"] = self.details
        out.update(attempt=attempt, occurred_at=occurred_at)
        return out


def parse_failure(value: object, where: str = "error") -> Failure:
    """Validate a FAIL error object; a missing error is a generic failure."""
    if value is None:
        return Failure(type="error", message="the worker reported a failure without details")
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{where} must be an object with 'type' or 'code' and 'message'", field=where)
    type_ = _optional_string(value, "type", where)
    code = _optional_string(value, "code", where)
    message = value.get("message", "")
    if not isinstance(message, str):
        raise InvalidRequest(f"{where}.message must be a string", field=f"{where}.message")
    retryable = value.get("retryable")
    if retryable is not None and not isinstance(retryable, bool):
        raise InvalidRequest(f"{where}.retryable must be true or false", field=f"{where}.retryable")
    details = value.get("details")
    if details is not None and not isinstance(details, Mapping):
        raise InvalidRequest(f"{where}.details must be an object", field=f"{where}.details")
    backtrace = value.get("backtrace", value.get("stack"))
    return Failure(
        type=type_ or code or "error",
        code=code or "",
        message=message[:MAX_MESSAGE_CHARS],
        retryable=retryable,
        backtrace=cap_backtrace(_frames(backtrace, where)),
        details=dict(details) if details else None,
    )


def _optional_string(value: Mapping[str, Any], name: str, where: str) -> str | None:
    item = value.get(name)
    if item is None:
        return None
    if not isinstance(item, str) or len(item) > 255:
        raise InvalidRequest(f"{where}.{name} must be a string of at most 255 characters", field=f"{where}.{name}")
    return item or None


def _frames(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.splitlines()
    if isinstance(value, list) and all(isinstance(frame, str) for frame in value):
        return value
    raise InvalidRequest(f"{where}.backtrace must be an array of strings", field=f"{where}.backtrace")


def cap_backtrace(frames: list[str]) -> list[str]:
    """Keep the first frames within the limits of ojs-core §8.1.

    Frames come innermost first, as in the spec's examples, so the head is
    the part worth keeping.
    """
    kept: list[str] = []
    budget = MAX_BACKTRACE_CHARS
    for frame in frames[:MAX_BACKTRACE_FRAMES]:
        if len(frame) > budget:
            break
        kept.append(frame)
        budget -= len(frame)
    return kept
