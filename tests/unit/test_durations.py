"""Durations and timestamps as the OJS wire spells them: django_ojs.protocol.durations (pure)."""

from __future__ import annotations

import datetime as dt

import pytest

from django_ojs.protocol.durations import (
    RelativeTime,
    format_duration,
    format_timestamp,
    parse_duration,
    parse_timestamp,
    to_millis,
)

UTC = dt.UTC
td = dt.timedelta


@pytest.mark.parametrize(("text", "expected"), [
    ("PT1S", td(seconds=1)),
    ("PT0.5S", td(milliseconds=500)),
    ("PT5M", td(minutes=5)),
    ("PT1H30M", td(hours=1, minutes=30)),
    ("P1DT2H", td(days=1, hours=2)),
    ("P2W", td(weeks=2)),
    ("P1Y", td(days=365)),
    ("P1M", td(days=30)),
    ("pt1s", td(seconds=1)),
    (" PT1S ", td(seconds=1)),
    ("1s", td(seconds=1)),
    ("300s", td(seconds=300)),
    ("500ms", td(milliseconds=500)),
    ("1h30m", td(hours=1, minutes=30)),
    ("1.5s", td(milliseconds=1500)),
    ("250us", td(microseconds=250)),
])
def test_iso_and_short_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", [
    "", "P", "PT", "1", "PT1", "T1S", "P1S", "PT-1S", "1d", "1 s", "PT1S junk", "P99999999999Y", None, 5, ["PT1S"],
    "PT١S", "２s",  # digits of other scripts
])
def test_malformed_durations_are_value_errors(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(("delta", "text"), [
    (td(seconds=1), "PT1S"),
    (td(milliseconds=1500), "PT1.5S"),
    (td(minutes=5), "PT5M"),
    (td(hours=2, seconds=3), "PT2H3S"),
    (td(days=1), "PT24H"),
    (td(0), "PT0S"),
])
def test_format_duration_round_trips(delta, text):
    assert format_duration(delta) == text
    assert parse_duration(text) == delta


def test_negative_durations_cannot_be_formatted():
    with pytest.raises(ValueError):
        format_duration(td(seconds=-1))


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-03-15T09:30:00Z", dt.datetime(2026, 3, 15, 9, 30, tzinfo=UTC)),
    ("2026-03-15T09:30:00.123Z", dt.datetime(2026, 3, 15, 9, 30, 0, 123000, tzinfo=UTC)),
    ("2026-03-15T09:30:00.123456789Z", dt.datetime(2026, 3, 15, 9, 30, 0, 123456, tzinfo=UTC)),
    ("2026-03-15T09:30:00+02:00", dt.datetime(2026, 3, 15, 7, 30, tzinfo=UTC)),
    ("2026-03-15t09:30:00z", dt.datetime(2026, 3, 15, 9, 30, tzinfo=UTC)),
    ("2026-03-15 09:30:00-01:30", dt.datetime(2026, 3, 15, 11, 0, tzinfo=UTC)),
])
def test_rfc3339_timestamps_are_read_as_utc(text, expected):
    parsed = parse_timestamp(text)
    assert parsed == expected and parsed.tzinfo == UTC


@pytest.mark.parametrize("text", [
    "2026-03-15T09:30:00",  # no timezone: ojs-core §5.5 rule 2
    "2026-03-15",
    "2026-03-15T09:30Z",
    "2026-02-30T00:00:00Z",
    "2026-03-15T25:00:00Z",
    "1773567000",
    "9999-12-31T23:59:59-01:00",  # after year 9999 in UTC
    "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
    "+P99999999D",  # "now" plus that is after year 9999
    "2026-03-15T09:30:00Z\n",  # "$" would match before the newline
    "２０２６-03-15T09:30:00Z",
    "",
    None,
    1773567000,
])
def test_timestamps_without_timezone_or_malformed_are_value_errors(text):
    with pytest.raises(ValueError):
        parse_timestamp(text)


def test_relative_timestamps_resolve_against_the_given_now():
    relative = parse_timestamp("+PT5S")
    assert relative == RelativeTime(td(seconds=5))
    now = dt.datetime(2026, 1, 1, tzinfo=UTC)
    assert relative.resolve(now) == dt.datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC)


def test_relative_timestamps_can_be_refused():
    with pytest.raises(ValueError):
        parse_timestamp("+PT5S", allow_relative=False)


@pytest.mark.parametrize(("value", "text"), [
    (dt.datetime(2026, 2, 12, 10, 30, tzinfo=UTC), "2026-02-12T10:30:00.000Z"),
    (dt.datetime(2026, 2, 12, 10, 30, 0, 123456, tzinfo=UTC), "2026-02-12T10:30:00.123Z"),
    (dt.datetime(2026, 2, 12, 10, 30, 0, 999, tzinfo=UTC), "2026-02-12T10:30:00.000Z"),
    (dt.datetime(2026, 2, 12, 12, 30, tzinfo=dt.timezone(td(hours=2))), "2026-02-12T10:30:00.000Z"),
    (dt.datetime(2026, 2, 12, 10, 30), "2026-02-12T10:30:00.000Z"),
    (None, None),
])
def test_timestamps_are_rendered_in_utc_with_z_and_always_milliseconds(value, text):
    assert format_timestamp(value) == text


def test_to_millis_truncates_to_whole_milliseconds():
    assert to_millis(td(seconds=1, microseconds=999)) == 1000
    assert to_millis(td(minutes=30)) == 1_800_000
