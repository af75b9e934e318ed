"""Durations and timestamps as the OJS wire spells them (pure, no database).

Durations: ISO 8601 (``PT1S``, ``PT0.5S``, ``P1DT2H``) as ojs-retry.md §4 asks,
and the short Go-style forms the core spec's own examples use (``1s``,
``300s``, ``500ms``, ``1h30m``).

Timestamps: RFC 3339 with a mandatory timezone (ojs-core §5.5 rule 2), or a
duration relative to "now" written ``+PT5S`` (openapi ``scheduled_at``; the
conformance cases use it for ``expires_at`` too).
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import overload

UTC = dt.UTC

# Matched with fullmatch() ("$" also accepts a trailing newline) and re.ASCII
# (r"\d" would also accept digits of other scripts).
_ISO_DURATION = re.compile(
    r"P(?!\Z)"
    r"(?:(?P<years>\d+(?:\.\d+)?)Y)?"
    r"(?:(?P<months>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<weeks>\d+(?:\.\d+)?)W)?"
    r"(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?=\d)"
    r"(?:(?P<hours>\d+(?:\.\d+)?)H)?"
    r"(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?"
    r")?",
    re.ASCII,
)
_SHORT_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|us|h|m|s))+", re.ASCII)
_SHORT_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", re.ASCII)
_SHORT_UNITS = {"h": 3600, "m": 60, "s": 1, "ms": Decimal("0.001"), "us": Decimal("0.000001")}

# Years and months have no fixed length; ojs-retry §4.2 discourages them, and
# we read them as 365 and 30 days so a policy written with them still works.
_ISO_UNITS = {
    "years": 365 * 86400,
    "months": 30 * 86400,
    "weeks": 7 * 86400,
    "days": 86400,
    "hours": 3600,
    "minutes": 60,
    "seconds": 1,
}

# RFC 3339: date, "T" (or space), time with optional fraction, and a zone.
_RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}:\d{2})"
    r"(?:\.(?P<fraction>\d{1,9}))?(?P<zone>[Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)


def parse_duration(value: object) -> dt.timedelta:
    """Parse an ISO 8601 or short duration string; raise ValueError if malformed."""
    if not isinstance(value, str) or not value:
        raise ValueError("must be an ISO 8601 duration string such as 'PT1S'")
    text = value.strip()
    match = _ISO_DURATION.fullmatch(text.upper()) if text[:1] in "Pp" else None
    if match:
        total = Decimal(0)
        for name, unit in _ISO_UNITS.items():
            if match.group(name):
                total += Decimal(match.group(name)) * unit
        return _seconds_to_timedelta(total)
    if _SHORT_DURATION.fullmatch(text):
        total = sum(
            (Decimal(number) * _SHORT_UNITS[unit] for number, unit in _SHORT_PART.findall(text)),
            Decimal(0),
        )
        return _seconds_to_timedelta(total)
    raise ValueError(f"{value!r} is not an ISO 8601 duration such as 'PT1S' or 'PT5M'")


def _seconds_to_timedelta(seconds: Decimal) -> dt.timedelta:
    try:
        return dt.timedelta(microseconds=int(seconds * 1_000_000))
    except (OverflowError, InvalidOperation) as exc:
        raise ValueError("duration is out of range") from exc


def format_duration(delta: dt.timedelta) -> str:
    """Render a timedelta as a compact ISO 8601 duration (``PT1.5S``, ``PT5M``)."""
    micros = delta // dt.timedelta(microseconds=1)
    if micros < 0:
        raise ValueError("negative durations have no ISO 8601 form")
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds = Decimal(rest) / 1_000_000
    out = "PT"
    if hours:
        out += f"{hours}H"
    if minutes:
        out += f"{minutes}M"
    if seconds or out == "PT":
        out += f"{seconds.normalize():f}S"
    return out


class RelativeTime:
    """A timestamp written as ``+<duration>``: resolved against the database clock."""

    __slots__ = ("offset",)

    def __init__(self, offset: dt.timedelta):
        self.offset = offset

    def resolve(self, now: dt.datetime) -> dt.datetime:
        return now + self.offset

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RelativeTime) and other.offset == self.offset

    def __repr__(self) -> str:
        return f"RelativeTime({self.offset!r})"


def parse_timestamp(value: object, *, allow_relative: bool = True) -> dt.datetime | RelativeTime:
    """Parse an RFC 3339 timestamp (timezone required) or a ``+PT..`` offset.

    Raises ValueError with a message fit for an API error.
    """
    if not isinstance(value, str) or not value:
        raise ValueError("must be an RFC 3339 timestamp with a timezone, e.g. '2026-03-15T09:30:00Z'")
    if allow_relative and value.startswith("+"):
        relative = RelativeTime(parse_duration(value[1:]))
        try:
            # The store resolves it against the database clock; refuse now an
            # offset that no clock could add without passing year 9999.
            relative.resolve(dt.datetime.now(UTC) + dt.timedelta(days=366))
        except OverflowError:
            raise ValueError(f"{value!r} is too far in the future") from None
        return relative
    match = _RFC3339.fullmatch(value)
    if not match:
        raise ValueError(
            f"{value!r} is not an RFC 3339 timestamp with a timezone (e.g. '2026-03-15T09:30:00Z')"
        )
    zone = "+00:00" if match["zone"] in "Zz" else match["zone"]
    fraction = f".{match['fraction'][:6]:0<6}" if match["fraction"] else ""
    try:
        parsed = dt.datetime.fromisoformat(f"{match['date']}T{match['time']}{fraction}{zone}")
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        # OverflowError: an offset that moves the instant out of years 1-9999.
        raise ValueError(f"{value!r} is not a valid date and time") from exc


@overload
def format_timestamp(value: dt.datetime) -> str: ...


@overload
def format_timestamp(value: None) -> None: ...


@overload
def format_timestamp(value: dt.datetime | None) -> str | None: ...


def format_timestamp(value: dt.datetime | None) -> str | None:
    """RFC 3339 in UTC with ``Z`` and always three digits of milliseconds (binding §6.3's form).

    One pattern for every time the server writes: typed clients parse with a fixed one
    (``.SSS``), and a time on a whole second (a cron's next run) would fail it without ``.000``.
    """
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return f"{value.strftime('%Y-%m-%dT%H:%M:%S')}.{value.microsecond // 1000:03d}Z"


def to_millis(delta: dt.timedelta) -> int:
    return delta // dt.timedelta(milliseconds=1)
