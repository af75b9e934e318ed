"""Snooze, signals and timers (this server's extension; docs/how-to/snooze-signals-timers.md), pure.

A job that snoozes or waits is *parked*: put back as ``scheduled`` until a
time (its ``run_at``), its lease released, the attempt it ran not charged
(a release, as NACK's ``"requeue": true``). A wait names a signal; the
signal, delivered by a producer or an operator, is stored on the job and
wakes it at once if it is parked on that name. What is checked here is what
every door shares: names, delays and timeouts, payloads.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest

# A signal's name: what a handler waits for and a producer sends. Letters, digits and
# ". _ - :", so it reads the same in a URL, a log line, a metric-free event and the admin.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}")
# The longest snooze or wait: a year. Longer is a schedule, not a pause.
MAX_DELAY = dt.timedelta(days=366)
# A signal's payload is stored on the job row: bounded like a small result.
MAX_PAYLOAD_BYTES = 64 * 1024


def signal_name(value: object, *, field: str = "name") -> str:
    """A valid signal name, or 400."""
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise InvalidRequest(
            f"{field} must be 1-128 characters of letters, digits and . _ - : starting with a letter or digit",
            field=field,
        )
    return value


def delay(value: object, *, field: str = "delay") -> dt.timedelta:
    """A snooze's delay or a wait's timeout, in seconds (a number > 0, at most MAX_DELAY), or 400."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InvalidRequest(f"{field} must be a number of seconds", field=field)
    if not 0 < value <= MAX_DELAY.total_seconds():
        raise InvalidRequest(
            f"{field} must be more than 0 and at most {int(MAX_DELAY.total_seconds())} seconds", field=field
        )
    return dt.timedelta(seconds=value)


def payload(value: Any, *, field: str = "payload") -> Any:
    """A signal's payload: any JSON value up to MAX_PAYLOAD_BYTES, or 400."""
    try:
        size = len(json.dumps(value, allow_nan=False).encode())
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"{field} must be a JSON value", field=field) from exc
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidRequest(f"{field} is {size} bytes; at most {MAX_PAYLOAD_BYTES} are stored", field=field)
    return value


@dataclass(frozen=True)
class WaitOutcome:
    """What a wait found: the signal's payload (``delivered``), its deadline passed
    (``timed_out``), or neither, and the job was parked until one of them happens."""

    delivered: bool = False
    payload: Any = None
    timed_out: bool = False
    parked: bool = False
    # The wait's deadline (all three outcomes).
    until: dt.datetime | None = None
