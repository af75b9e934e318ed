"""Cron expressions and timezones for OJS cron jobs (ojs-cron.md §3-5; pure).

``parse_schedule`` validates and compiles an expression once; the compiled
``Schedule`` then finds the next fire time field by field (month, day, hour,
minute, second) rather than minute by minute, so sparse schedules such as
"Feb 29" or "the fifth Monday of February" cost a few dozen steps.

Wall times are matched in the job's timezone and turned into real UTC instants:
a wall time skipped by spring-forward does not fire, and one repeated by
fall-back fires once, at its first occurrence (§5.2).
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import MAXYEAR, UTC, datetime, timedelta, tzinfo
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

_SECOND = timedelta(seconds=1)

# The longest wait between two firings of a satisfiable expression is 40 years
# ("the fifth Monday of February" needs a leap year whose February starts on a
# Monday, and 2100 is not a leap year), so a 50-year search never mistakes a
# rare schedule for an impossible one.
_HORIZON_YEARS = 50
# parse_schedule probes from a fixed instant so that validation is deterministic.
_PROBE_FROM = datetime(2000, 1, 1, tzinfo=UTC)


class CronError(ValueError):
    """An invalid cron expression or timezone, or a schedule that never fires."""


# --- timezones (§5.1) --------------------------------------------------------

_EXAMPLE_ZONE = "an IANA name such as 'America/New_York'"
# "+05:00", "-08:00", "UTC+5", "GMT-3", "GMT0": offsets ignore daylight saving time.
_OFFSET_NAME = re.compile(r"(?:UTC|GMT)?[+-]?[0-9]", re.IGNORECASE)
_ABBREVIATION = re.compile(r"[A-Z]{3,4}")
_UNAMBIGUOUS_ABBREVIATIONS = frozenset({"UTC", "GMT"})


def validate_timezone(name: object) -> ZoneInfo:
    """Return the zone for an IANA name; reject offsets, abbreviations and unknown names."""
    if not isinstance(name, str) or not name:
        raise CronError(f"timezone must be {_EXAMPLE_ZONE}")
    if _OFFSET_NAME.match(name):
        raise CronError(
            f"timezone {name!r} is a fixed UTC offset, which ignores daylight saving time; "
            f"use {_EXAMPLE_ZONE}"
        )
    if _ABBREVIATION.fullmatch(name) and name not in _UNAMBIGUOUS_ABBREVIATIONS:
        raise CronError(f"timezone {name!r} is an ambiguous abbreviation; use {_EXAMPLE_ZONE}")
    if name not in _iana_names():
        raise CronError(f"timezone {name!r} is not an IANA timezone name; use {_EXAMPLE_ZONE}")
    return ZoneInfo(name)


@cache
def _iana_names() -> frozenset[str]:
    """The zone names of the installed tz database (scanning it is slow, so once)."""
    # "localtime" is whatever zone the host runs in, not an IANA zone.
    return frozenset(available_timezones() - {"localtime"})


# --- fields (§3) ---------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """One position of a cron expression: its name for messages and its bounds."""

    name: str
    low: int
    high: int
    # Three-letter names, the first standing for `low`.
    names: tuple[str, ...] = ()


_SECONDS = _Field("second", 0, 59)
_MINUTES = _Field("minute", 0, 59)
_HOURS = _Field("hour", 0, 23)
_DAYS_OF_MONTH = _Field("day-of-month", 1, 31)
_MONTHS = _Field("month", 1, 12, tuple(name.lower() for name in calendar.month_abbr[1:]))
# 7 is accepted as a second Sunday and folded onto 0 after expansion.
_DAYS_OF_WEEK = _Field("day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat"))

_ITEM = re.compile(r"(?P<start>\*|\w+)(?:-(?P<end>\w+))?(?:/(?P<step>\w+))?", re.ASCII)
_NEAREST_WEEKDAY = re.compile(r"(?P<day>[0-9]+)W", re.ASCII | re.IGNORECASE)
_WEEKDAY_IN_MONTH = re.compile(
    r"(?P<day>[0-9]+|[a-z]{3})(?:(?P<last>L)|#(?P<nth>[0-9]+))", re.ASCII | re.IGNORECASE
)


def _parse_values(text: str, spec: _Field) -> tuple[int, ...]:
    """Expand a list of values, ranges and steps (``1,5-10,*/15``) into sorted values."""
    values: set[int] = set()
    for item in text.split(","):
        values.update(_parse_item(item, spec))
    return tuple(sorted(values))


def _parse_item(item: str, spec: _Field) -> range:
    """Expand ``*``, ``5``, ``1-5``, ``*/15``, ``1-30/5`` or ``5/15`` (5 to the maximum)."""
    match = _ITEM.fullmatch(item)
    if not match or (match["start"] == "*" and match["end"]):
        raise CronError(f"{spec.name} {item!r} is not a value, range or step")
    step = 1 if match["step"] is None else _parse_step(item, match["step"], spec)
    if match["start"] == "*":
        return range(spec.low, spec.high + 1, step)
    start = _parse_value(match["start"], spec)
    if match["end"] is not None:
        end = _parse_value(match["end"], spec)
    else:
        end = spec.high if match["step"] is not None else start
    if start > end:
        raise CronError(f"{spec.name} range {item!r} runs backwards; put the smaller value first")
    return range(start, end + 1, step)


def _parse_step(item: str, text: str, spec: _Field) -> int:
    """The step after ``/``: 1 up to the field's maximum."""
    if not text.isdigit():
        raise CronError(f"{spec.name} step in {item!r} is not a number")
    step = int(text)
    if step == 0:
        raise CronError(f"{spec.name} step in {item!r} must be at least 1")
    # A step past the field's maximum names one value at most: almost always a
    # mistake such as "*/90" for "every 90 minutes", which @every expresses.
    if step > spec.high:
        raise CronError(f"{spec.name} step in {item!r} must be at most {spec.high}")
    return step


def _parse_value(token: str, spec: _Field) -> int:
    """A number or three-letter name, checked against the field's bounds."""
    if token.isdigit():
        value = int(token)
    elif token.lower() in spec.names:
        value = spec.low + spec.names.index(token.lower())
    else:
        kind = "a number or a three-letter name" if spec.names else "a number"
        raise CronError(f"{spec.name} value {token!r} is not {kind}")
    if not spec.low <= value <= spec.high:
        raise CronError(f"{spec.name} value {token!r} is out of range {spec.low}-{spec.high}")
    return value


# --- day of month and day of week ------------------------------------------------


@dataclass(frozen=True)
class _DayOfMonth:
    """A restricted day-of-month field: plain days, ``15W``, ``L`` and ``LW``."""

    days: frozenset[int]
    nearest_weekday: frozenset[int]
    last: bool
    last_weekday: bool

    def days_in(self, year: int, month: int, length: int) -> set[int]:
        # Days past the month's end (31 in April) simply do not fire (§3.5).
        found = {day for day in self.days if day <= length}
        found.update(
            _nearest_weekday(year, month, day, length) for day in self.nearest_weekday if day <= length
        )
        if self.last:
            found.add(length)
        if self.last_weekday:
            found.add(_nearest_weekday(year, month, length, length))
        return found


@dataclass(frozen=True)
class _DayOfWeek:
    """A restricted day-of-week field (0 = Sunday): plain days, ``5L`` and ``5#3``."""

    weekdays: frozenset[int]
    last: frozenset[int]
    nth: frozenset[tuple[int, int]]

    def days_in(self, first_weekday: int, length: int) -> set[int]:
        def first(weekday: int) -> int:
            return 1 + (weekday - first_weekday) % 7

        found: set[int] = set()
        for weekday in self.weekdays:
            found.update(range(first(weekday), length + 1, 7))
        for weekday in self.last:
            found.add(first(weekday) + (length - first(weekday)) // 7 * 7)
        for weekday, n in self.nth:
            day = first(weekday) + 7 * (n - 1)
            if day <= length:
                found.add(day)
        return found


def _nearest_weekday(year: int, month: int, day: int, length: int) -> int:
    """The weekday closest to `day` without leaving the month (Quartz ``W``)."""
    weekday = calendar.weekday(year, month, day)
    if weekday == calendar.SATURDAY:
        return day - 1 if day > 1 else day + 2
    if weekday == calendar.SUNDAY:
        return day + 1 if day < length else day - 2
    return day


def _parse_day_of_month(text: str) -> _DayOfMonth:
    """A restricted day-of-month field: a list of days, ranges, ``15W``, ``L`` and ``LW``."""
    days: set[int] = set()
    nearest: set[int] = set()
    last = last_weekday = False
    for item in text.split(","):
        special = item.upper()
        if special == "L":
            last = True
        elif special == "LW":
            last_weekday = True
        elif match := _NEAREST_WEEKDAY.fullmatch(item):
            nearest.add(_parse_value(match["day"], _DAYS_OF_MONTH))
        else:
            days.update(_parse_item(item, _DAYS_OF_MONTH))
    return _DayOfMonth(frozenset(days), frozenset(nearest), last, last_weekday)


def _parse_day_of_week(text: str) -> _DayOfWeek:
    """A restricted day-of-week field: a list of days, ranges, ``5L`` and ``5#3``."""
    weekdays: set[int] = set()
    last: set[int] = set()
    nth: set[tuple[int, int]] = set()
    for item in text.split(","):
        if item.upper() == "L":
            raise CronError(
                "day-of-week 'L' needs a weekday in front, e.g. '5L' for the last Friday "
                "of the month ('L' alone belongs in day-of-month)"
            )
        match = _WEEKDAY_IN_MONTH.fullmatch(item)
        if match is None:
            weekdays.update(value % 7 for value in _parse_item(item, _DAYS_OF_WEEK))
            continue
        weekday = _parse_value(match["day"], _DAYS_OF_WEEK) % 7
        if match["last"]:
            last.add(weekday)
        elif 1 <= int(match["nth"]) <= 5:
            nth.add((weekday, int(match["nth"])))
        else:
            raise CronError(f"day-of-week {item!r}: the number after '#' must be 1-5")
    return _DayOfWeek(frozenset(weekdays), frozenset(last), frozenset(nth))


# --- compiled rules ----------------------------------------------------------------

# The smallest value of year, month, day, hour, minute, second (year is never reset).
_UNIT_MINIMUMS = (0, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class _CronRule:
    """A field-based expression; a day field of None is ``*`` and does not restrict."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    day_of_month: _DayOfMonth | None
    day_of_week: _DayOfWeek | None

    def next_after(self, after: datetime, tz: tzinfo, anchor: datetime | None) -> datetime | None:
        local = after.astimezone(tz).replace(microsecond=0)
        # In the second pass of a repeated hour every wall time until its end has
        # already had its first (firing) occurrence, so the search starts after it.
        start = _end_of_repeat(local, tz) if local.fold else local.replace(tzinfo=None) + _SECOND
        last_year = min(start.year + _HORIZON_YEARS, MAXYEAR)
        while (wall := self._next_wall(start, last_year)) is not None:
            instant = _instant(wall, tz)
            if instant is not None:
                return instant
            start = _end_of_gap(wall, tz)
        return None

    def _next_wall(self, start: datetime, last_year: int) -> datetime | None:
        """The first matching wall time at or after `start`, like an odometer."""
        units = list(start.timetuple()[:6])
        level = 1
        while units[0] <= last_year:
            value = _first_at_least(self._allowed(level, units), units[level])
            if value is None:
                # This unit has no match left: carry into the one above.
                level -= 1
                units[level] += 1
                units[level + 1 :] = _UNIT_MINIMUMS[level + 1 :]
                level = max(level, 1)
                continue
            if value != units[level]:
                units[level + 1 :] = _UNIT_MINIMUMS[level + 1 :]
                units[level] = value
            if level == 5:
                return datetime(*units)
            level += 1
        return None

    def _allowed(self, level: int, units: list[int]) -> Sequence[int]:
        """The sorted values allowed at `level` (1 = month ... 5 = second)."""
        if level == 1:
            return self.months
        if level == 2:
            return self._days(units[0], units[1])
        return (self.hours, self.minutes, self.seconds)[level - 3]

    def _days(self, year: int, month: int) -> Sequence[int]:
        """The sorted days of this month that the day fields match."""
        first_weekday, length = calendar.monthrange(year, month)
        if self.day_of_month is None and self.day_of_week is None:
            return range(1, length + 1)
        # Vixie cron: when both day fields are restricted, a day matching either fires.
        days: set[int] = set()
        if self.day_of_month is not None:
            days |= self.day_of_month.days_in(year, month, length)
        if self.day_of_week is not None:
            # calendar counts Monday as 0, cron counts Sunday as 0.
            days |= self.day_of_week.days_in((first_weekday + 1) % 7, length)
        return sorted(days)


@dataclass(frozen=True)
class _IntervalRule:
    """``@every <duration>``: real elapsed time from an anchor, whatever the wall clock does."""

    interval: timedelta

    def next_after(self, after: datetime, tz: tzinfo, anchor: datetime | None) -> datetime | None:
        start = after if anchor is None else anchor
        # At least one interval past the anchor: it is the last trigger (or the
        # registration), which must not fire again even if the clock stepped back.
        steps = max((after - start) // self.interval + 1, 1)
        try:
            return (start + steps * self.interval).astimezone(UTC)
        except OverflowError:
            return None


def _first_at_least(values: Sequence[int], floor: int) -> int | None:
    """The smallest of the sorted `values` that is >= `floor`, if any."""
    index = bisect_left(values, floor)
    return values[index] if index < len(values) else None


# --- daylight saving time (§5.2) ----------------------------------------------------


def _instant(wall: datetime, tz: tzinfo) -> datetime | None:
    """The UTC instant of a wall time: its first occurrence if repeated, None if skipped."""
    instant = wall.replace(tzinfo=tz).astimezone(UTC)  # fold=0: the first occurrence
    if instant.astimezone(tz).replace(tzinfo=None) != wall:
        return None  # spring-forward jumped over this wall time
    return instant


def _end_of_gap(wall: datetime, tz: tzinfo) -> datetime:
    """The first wall time after the spring-forward gap that contains `wall`."""
    # PEP 495: read with the offset after the jump (fold=1), a skipped wall time
    # lands before the jump; read with the offset before it (fold=0), after it.
    jump = _offset_change(_timestamp(wall.replace(fold=1), tz), _timestamp(wall, tz), tz)
    return _wall_time(jump, tz)


def _end_of_repeat(local: datetime, tz: tzinfo) -> datetime:
    """The first wall time after the repeated (fall-back) period that `local` is in."""
    jump = _offset_change(int(local.replace(fold=0).timestamp()), int(local.timestamp()), tz)
    # One second before the jump the clock shows the last repeated second.
    return _wall_time(jump - 1, tz) + _SECOND


def _offset_change(before: int, after: int, tz: tzinfo) -> int:
    """The first second in (before, after] whose UTC offset differs from the one at `before`."""
    offset = _offset_at(before, tz)
    while after - before > 1:
        middle = (before + after) // 2
        if _offset_at(middle, tz) == offset:
            before = middle
        else:
            after = middle
    return after


def _timestamp(wall: datetime, tz: tzinfo) -> int:
    return int(wall.replace(tzinfo=tz).timestamp())


def _offset_at(timestamp: int, tz: tzinfo) -> timedelta | None:
    return datetime.fromtimestamp(timestamp, tz).utcoffset()


def _wall_time(timestamp: int, tz: tzinfo) -> datetime:
    return datetime.fromtimestamp(timestamp, tz).replace(tzinfo=None)


# --- schedules -------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """A validated, compiled expression; build it with parse_schedule."""

    expression: str
    _rule: _CronRule | _IntervalRule = field(repr=False)

    def next_after(self, after: datetime, tz: tzinfo, anchor: datetime | None = None) -> datetime:
        """The first fire time strictly after `after`, evaluated in `tz`, as an aware UTC datetime.

        `anchor` (registration or last trigger time) only matters to ``@every``,
        which fires at anchor + k * interval; it defaults to `after`.
        """
        _require_aware(after, "after")
        if anchor is not None:
            _require_aware(anchor, "anchor")
        found = self._rule.next_after(after, tz, anchor)
        if found is None:
            raise CronError(
                f"schedule {self.expression!r} never fires "
                f"(no occurrence within {_HORIZON_YEARS} years)"
            )
        return found


def _require_aware(value: datetime, name: str) -> None:
    # A naive datetime is a caller bug, not bad user input: plain ValueError.
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime")


_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_GO_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:ms|h|m|s))+")
_GO_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")
_GO_UNITS = {"h": "hours", "m": "minutes", "s": "seconds", "ms": "milliseconds"}


# The size of the column that stores it (CronJob.expression).
MAX_EXPRESSION_LENGTH = 255


def parse_schedule(expression: object) -> Schedule:
    """Validate and compile a cron, macro or ``@every`` expression; raise CronError if invalid."""
    if not isinstance(expression, str):
        raise CronError("cron expression must be a string")
    text = expression.strip()
    if not text:
        raise CronError("cron expression must not be empty")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise CronError(f"cron expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    rule = _parse_special(text) if text.startswith("@") else _parse_fields(text)
    schedule = Schedule(expression, rule)
    # Fail at registration, not silently later, for expressions such as Feb 30.
    schedule.next_after(_PROBE_FROM, UTC)
    return schedule


def _parse_fields(text: str) -> _CronRule:
    """Five fields, or six with seconds first, told apart by token count (§3.2)."""
    tokens = text.split()
    if len(tokens) == 5:
        tokens.insert(0, "0")  # five fields fire at second 0 (§3.2)
    elif len(tokens) != 6:
        raise CronError(
            "cron expression must have 5 fields (minute hour day-of-month month day-of-week) "
            f"or 6 with seconds first, got {len(tokens)}"
        )
    second, minute, hour, day_of_month, month, day_of_week = tokens
    return _CronRule(
        seconds=_parse_values(second, _SECONDS),
        minutes=_parse_values(minute, _MINUTES),
        hours=_parse_values(hour, _HOURS),
        months=_parse_values(month, _MONTHS),
        day_of_month=None if day_of_month == "*" else _parse_day_of_month(day_of_month),
        day_of_week=None if day_of_week == "*" else _parse_day_of_week(day_of_week),
    )


def _parse_special(text: str) -> _CronRule | _IntervalRule:
    """A macro such as ``@daily`` (§4) or ``@every <duration>`` (§4.1)."""
    lowered = text.lower()
    if lowered in _MACROS:
        return _parse_fields(_MACROS[lowered])
    keyword, *rest = lowered.split(None, 1)
    if keyword == "@every":
        return _IntervalRule(_parse_go_duration(rest[0] if rest else ""))
    raise CronError(
        f"unknown special expression {text!r}; use one of {', '.join(_MACROS)} or @every <duration>"
    )


def _parse_go_duration(text: str) -> timedelta:
    """A Go-style duration (``30m``, ``1h30m``, ``1.5h``, ``500ms``) that is greater than zero."""
    if not _GO_DURATION.fullmatch(text):
        raise CronError(f"@every needs a duration such as '30m', '1h30m', '45s' or '500ms', got {text!r}")
    parts = _GO_DURATION_PART.findall(text)
    try:
        interval = sum((timedelta(**{_GO_UNITS[unit]: float(number)}) for number, unit in parts), timedelta())
    except OverflowError:
        raise CronError(f"@every duration {text!r} is too long") from None
    if interval <= timedelta():
        raise CronError(f"@every duration {text!r} must be greater than zero")
    return interval
