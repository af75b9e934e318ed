"""Unit tests for django_ojs.protocol.cron (pure: no Django, no database)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from django_ojs.protocol.cron import CronError, Schedule, parse_schedule, validate_timezone

TOKYO = ZoneInfo("Asia/Tokyo")
NEW_YORK = ZoneInfo("America/New_York")


def at(*parts: int) -> datetime:
    """An aware UTC datetime: at(2026, 2, 12, 9, 30)."""
    return datetime(*parts, tzinfo=UTC)


def next_run(expression: str, after: datetime, tz: ZoneInfo | timezone = UTC) -> datetime:
    return parse_schedule(expression).next_after(after, tz)


def runs(expression: str, after: datetime, count: int, tz: ZoneInfo | timezone = UTC) -> list[datetime]:
    """The next `count` fire times, each found from the previous one."""
    schedule = parse_schedule(expression)
    found = []
    for _ in range(count):
        after = schedule.next_after(after, tz)
        found.append(after)
    return found


# 2026-02-12 is a Thursday.
THURSDAY = at(2026, 2, 12, 3, 0)


# --- macros (§4) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("@yearly", at(2027, 1, 1)),
        ("@annually", at(2027, 1, 1)),
        ("@monthly", at(2026, 3, 1)),
        ("@weekly", at(2026, 2, 15)),  # the next Sunday
        ("@daily", at(2026, 2, 13)),
        ("@midnight", at(2026, 2, 13)),
        ("@hourly", at(2026, 2, 12, 4, 0)),
        ("@DAILY", at(2026, 2, 13)),
        ("@Hourly", at(2026, 2, 12, 4, 0)),
    ],
)
def test_macros(expression: str, expected: datetime) -> None:
    assert next_run(expression, THURSDAY) == expected


def test_macro_equals_its_expansion() -> None:
    after = at(2026, 5, 17, 13, 41)
    for macro, cron in [("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *")]:
        assert runs(macro, after, 3) == runs(cron, after, 3)


def test_conformance_expressions_are_accepted() -> None:
    for expression in ["@daily", "@hourly", "@weekly", "*/5 * * * *", "0 9 * * *", "* * * * *"]:
        assert parse_schedule(expression).expression == expression


def test_expression_is_kept_as_given_and_schedule_is_immutable() -> None:
    schedule = parse_schedule("  @DAILY ")
    assert isinstance(schedule, Schedule)
    assert schedule.expression == "  @DAILY "
    with pytest.raises(dataclasses.FrozenInstanceError):
        schedule.expression = "@hourly"  # type: ignore[misc]


# --- basic syntax (§3.1-3.3) -----------------------------------------------------


def test_every_five_minutes() -> None:
    assert runs("*/5 * * * *", at(2026, 2, 12, 10, 58), 3) == [
        at(2026, 2, 12, 11, 0),
        at(2026, 2, 12, 11, 5),
        at(2026, 2, 12, 11, 10),
    ]


def test_next_is_strictly_after() -> None:
    assert next_run("0 9 * * *", at(2026, 2, 12, 9, 0)) == at(2026, 2, 13, 9, 0)


def test_five_fields_fire_at_second_zero() -> None:
    assert next_run("* * * * *", at(2026, 2, 12, 10, 0, 30)) == at(2026, 2, 12, 10, 1, 0)


def test_sub_second_after_rounds_up_to_the_next_second() -> None:
    after = at(2026, 2, 12, 10, 0, 0) + timedelta(milliseconds=500)
    assert next_run("* * * * * *", after) == at(2026, 2, 12, 10, 0, 1)


def test_list() -> None:
    assert runs("1,15 * * * *", at(2026, 2, 12, 10, 0), 3) == [
        at(2026, 2, 12, 10, 1),
        at(2026, 2, 12, 10, 15),
        at(2026, 2, 12, 11, 1),
    ]


def test_range() -> None:
    assert runs("0 22-23 * * *", at(2026, 2, 12, 22, 30), 2) == [
        at(2026, 2, 12, 23, 0),
        at(2026, 2, 13, 22, 0),
    ]


def test_step_on_a_range() -> None:
    assert runs("1-30/10 * * * *", at(2026, 2, 12, 10, 0), 4) == [
        at(2026, 2, 12, 10, 1),
        at(2026, 2, 12, 10, 11),
        at(2026, 2, 12, 10, 21),
        at(2026, 2, 12, 11, 1),
    ]


def test_step_on_a_single_value_runs_to_the_maximum() -> None:
    assert runs("5/20 * * * *", at(2026, 2, 12, 10, 0), 4) == [
        at(2026, 2, 12, 10, 5),
        at(2026, 2, 12, 10, 25),
        at(2026, 2, 12, 10, 45),
        at(2026, 2, 12, 11, 5),
    ]


def test_hour_step_crosses_midnight() -> None:
    assert runs("0 */6 * * *", at(2026, 2, 12, 19, 0), 2) == [at(2026, 2, 13, 0, 0), at(2026, 2, 13, 6, 0)]


def test_month_rolls_over_into_next_year() -> None:
    assert next_run("0 0 1 1 *", at(2026, 12, 31, 23, 59, 59)) == at(2027, 1, 1)


def test_day_31_skips_short_months() -> None:
    assert runs("0 0 31 * *", at(2026, 3, 31, 12), 2) == [at(2026, 5, 31), at(2026, 7, 31)]


def test_whitespace_between_fields_is_free() -> None:
    assert next_run(" 0\t9  *  * * ", THURSDAY) == at(2026, 2, 12, 9, 0)


# --- six fields (§3.2) --------------------------------------------------------------


def test_six_fields_have_seconds_first() -> None:
    assert runs("*/15 * * * * *", at(2026, 2, 12, 10, 0, 7), 4) == [
        at(2026, 2, 12, 10, 0, 15),
        at(2026, 2, 12, 10, 0, 30),
        at(2026, 2, 12, 10, 0, 45),
        at(2026, 2, 12, 10, 1, 0),
    ]


def test_six_fields_with_fixed_time() -> None:
    assert next_run("30 0 9 * * *", THURSDAY) == at(2026, 2, 12, 9, 0, 30)


# --- names and Sunday (§3.4) ---------------------------------------------------------


def test_sunday_is_zero_and_seven() -> None:
    expected = at(2026, 2, 15)
    for day in ["0", "7", "SUN", "sun"]:
        assert next_run(f"0 0 * * {day}", THURSDAY) == expected


def test_seven_in_a_range_is_sunday() -> None:
    assert runs("0 0 * * 6-7", THURSDAY, 3) == [at(2026, 2, 14), at(2026, 2, 15), at(2026, 2, 21)]


def test_month_and_day_names_case_insensitive() -> None:
    assert next_run("0 9 * JAN-MAR Mon-fri", at(2026, 3, 31, 10)) == at(2027, 1, 1, 9, 0)
    assert next_run("0 0 1 jun *", THURSDAY) == at(2026, 6, 1)
    assert next_run("0 0 * * TUE,thu", at(2026, 2, 11, 1)) == at(2026, 2, 12)


def test_names_and_numbers_agree() -> None:
    assert runs("0 12 * JUL-SEP/2 MON", THURSDAY, 5) == runs("0 12 * 7-9/2 1", THURSDAY, 5)


# --- day-of-month L and W ---------------------------------------------------------------


def test_last_day_of_month() -> None:
    assert runs("0 0 L * *", THURSDAY, 3) == [at(2026, 2, 28), at(2026, 3, 31), at(2026, 4, 30)]


def test_last_day_of_february_in_a_leap_year() -> None:
    assert next_run("0 0 L 2 *", THURSDAY) == at(2026, 2, 28)
    assert next_run("0 0 L 2 *", at(2028, 1, 1)) == at(2028, 2, 29)


def test_last_weekday_of_month() -> None:
    # 2026-01-31 is a Saturday, 2026-05-31 a Sunday, 2026-03-31 a Tuesday.
    assert next_run("0 0 LW * *", at(2026, 1, 1)) == at(2026, 1, 30)
    assert next_run("0 0 LW * *", at(2026, 5, 1)) == at(2026, 5, 29)
    assert next_run("0 0 LW * *", at(2026, 3, 1)) == at(2026, 3, 31)


def test_nearest_weekday_on_a_weekday_is_that_day() -> None:
    assert next_run("0 0 15W * *", at(2026, 1, 1)) == at(2026, 1, 15)  # a Thursday


def test_nearest_weekday_to_a_saturday_is_friday() -> None:
    assert next_run("0 0 15W * *", at(2026, 8, 1)) == at(2026, 8, 14)


def test_nearest_weekday_to_a_sunday_is_monday() -> None:
    assert next_run("0 0 15W * *", at(2026, 2, 1)) == at(2026, 2, 16)


def test_nearest_weekday_to_saturday_the_first_stays_in_the_month() -> None:
    # 2026-08-01 is a Saturday: Friday would be July 31, so it is Monday the 3rd.
    assert next_run("0 0 1W * *", at(2026, 7, 2)) == at(2026, 8, 3)


def test_nearest_weekday_to_sunday_the_first_is_monday_the_second() -> None:
    assert next_run("0 0 1W * *", at(2026, 1, 2)) == at(2026, 2, 2)


def test_nearest_weekday_to_a_sunday_at_month_end_is_friday() -> None:
    # 2026-05-31 is a Sunday: Monday would be June 1, so it is Friday the 29th.
    assert next_run("0 0 31W * *", at(2026, 5, 1)) == at(2026, 5, 29)


def test_nearest_weekday_to_a_missing_day_does_not_fire() -> None:
    assert next_run("0 0 30W * *", at(2026, 1, 31)) == at(2026, 3, 30)


def test_day_of_month_specials_combine_in_a_list() -> None:
    assert runs("0 0 1,15W,L * *", at(2026, 2, 1, 1), 3) == [at(2026, 2, 16), at(2026, 2, 28), at(2026, 3, 1)]


# --- day-of-week L and # -----------------------------------------------------------------


def test_last_friday_of_month() -> None:
    assert runs("0 0 * * 5L", THURSDAY, 3) == [at(2026, 2, 27), at(2026, 3, 27), at(2026, 4, 24)]
    assert next_run("0 0 * * FRIL", THURSDAY) == at(2026, 2, 27)


def test_last_sunday_written_as_seven() -> None:
    assert next_run("0 0 * * 7L", THURSDAY) == at(2026, 2, 22)


def test_third_friday_of_month() -> None:
    assert runs("0 0 * * 5#3", THURSDAY, 3) == [at(2026, 2, 20), at(2026, 3, 20), at(2026, 4, 17)]
    assert next_run("0 0 * * fri#3", THURSDAY) == at(2026, 2, 20)


def test_fifth_weekday_skips_months_without_one() -> None:
    # February 2026 has four Mondays; March 2026 has five.
    assert next_run("0 0 * * 1#5", at(2026, 2, 1)) == at(2026, 3, 30)


def test_first_monday() -> None:
    assert next_run("0 0 * * MON#1", THURSDAY) == at(2026, 3, 2)


# --- day-of-month / day-of-week combination (Vixie OR rule) -----------------------------


def test_both_day_fields_restricted_means_either() -> None:
    # The 1st of the month OR any Monday.
    assert runs("0 0 1 * 1", THURSDAY, 3) == [at(2026, 2, 16), at(2026, 2, 23), at(2026, 3, 1)]


def test_only_day_of_week_restricts_when_day_of_month_is_star() -> None:
    assert runs("0 0 * * 1", at(2026, 2, 24), 2) == [at(2026, 3, 2), at(2026, 3, 9)]


def test_only_day_of_month_restricts_when_day_of_week_is_star() -> None:
    assert runs("0 0 1 * *", THURSDAY, 2) == [at(2026, 3, 1), at(2026, 4, 1)]


def test_or_rule_with_specials() -> None:
    # The last day OR any Friday.
    assert runs("0 0 L * 5", at(2026, 2, 21), 3) == [at(2026, 2, 27), at(2026, 2, 28), at(2026, 3, 6)]


def test_or_rule_makes_day_31_friday_frequent() -> None:
    assert runs("0 0 31 * 5", THURSDAY, 3) == [at(2026, 2, 13), at(2026, 2, 20), at(2026, 2, 27)]


# --- rare and impossible schedules ------------------------------------------------------


def test_february_29() -> None:
    assert next_run("0 0 29 2 *", THURSDAY) == at(2028, 2, 29)


def test_february_29_across_a_non_leap_century() -> None:
    assert next_run("0 0 29 2 *", at(2096, 3, 1)) == at(2104, 2, 29)


def test_fifth_monday_of_february_forty_years_apart() -> None:
    # The longest wait of any satisfiable expression: 2100 is not a leap year.
    assert next_run("0 0 * 2 1#5", at(2026, 1, 1)) == at(2044, 2, 29)
    assert next_run("0 0 * 2 1#5", at(2072, 3, 1)) == at(2112, 2, 29)


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 2 *", "0 0 31 4,6,9,11 *", "0 0 30W 2 *"])
def test_expressions_that_never_fire_are_rejected_at_parse(expression: str) -> None:
    with pytest.raises(CronError, match="never fires"):
        parse_schedule(expression)


def test_next_after_raises_when_dst_makes_a_schedule_impossible() -> None:
    # 02:30 on the second Sunday of March never exists in New York.
    schedule = parse_schedule("30 2 * 3 0#2")
    assert schedule.next_after(THURSDAY, UTC) == at(2026, 3, 8, 2, 30)
    with pytest.raises(CronError, match="never fires"):
        schedule.next_after(THURSDAY, NEW_YORK)


# --- @every (§4.1) -------------------------------------------------------------------------


def test_every_is_anchored() -> None:
    schedule = parse_schedule("@every 30m")
    anchor = at(2026, 1, 1, 0, 0)
    assert schedule.next_after(at(2026, 1, 1, 1, 10), UTC, anchor) == at(2026, 1, 1, 1, 30)
    # The anchor's own grid, not clock minutes: registered at 00:07.
    assert schedule.next_after(at(2026, 1, 1, 1, 10), UTC, at(2026, 1, 1, 0, 7)) == at(2026, 1, 1, 1, 37)


def test_every_on_the_grid_moves_to_the_next_point() -> None:
    schedule = parse_schedule("@every 30m")
    assert schedule.next_after(at(2026, 1, 1, 1, 30), UTC, at(2026, 1, 1)) == at(2026, 1, 1, 2, 0)


def test_every_catch_up_skips_missed_points() -> None:
    # Paused for hours: the next run is the first grid point after now, not a backlog.
    schedule = parse_schedule("@every 5m")
    assert schedule.next_after(at(2026, 1, 1, 3, 2), UTC, at(2026, 1, 1)) == at(2026, 1, 1, 3, 5)


def test_every_without_anchor_counts_from_after() -> None:
    after = at(2026, 1, 1, 1, 10, 3)
    assert parse_schedule("@every 2h").next_after(after, UTC) == after + timedelta(hours=2)


def test_every_anchor_in_the_future_fires_one_interval_after_it() -> None:
    schedule = parse_schedule("@every 1h")
    assert schedule.next_after(at(2026, 1, 1, 0), UTC, at(2026, 1, 1, 5)) == at(2026, 1, 1, 6)


@pytest.mark.parametrize(
    ("expression", "interval"),
    [
        ("@every 30m", timedelta(minutes=30)),
        ("@every 2h", timedelta(hours=2)),
        ("@every 1h30m", timedelta(hours=1, minutes=30)),
        ("@every 2h45m30s", timedelta(hours=2, minutes=45, seconds=30)),
        ("@every 45s", timedelta(seconds=45)),
        ("@every 500ms", timedelta(milliseconds=500)),
        ("@every 1.5h", timedelta(minutes=90)),
        ("@EVERY 10M", timedelta(minutes=10)),
    ],
)
def test_every_durations(expression: str, interval: timedelta) -> None:
    after = at(2026, 1, 1, 12)
    assert parse_schedule(expression).next_after(after, UTC) == after + interval


def test_every_counts_real_time_across_fall_back() -> None:
    assert runs("@every 1h", at(2026, 11, 1, 4), 4, NEW_YORK) == [
        at(2026, 11, 1, 5),
        at(2026, 11, 1, 6),
        at(2026, 11, 1, 7),
        at(2026, 11, 1, 8),
    ]


def test_every_returns_utc() -> None:
    after = datetime(2026, 1, 1, 9, tzinfo=TOKYO)
    found = parse_schedule("@every 1h").next_after(after, TOKYO)
    assert found.tzinfo is UTC
    assert found == at(2026, 1, 1, 1)


@pytest.mark.parametrize(
    "expression",
    ["@every", "@every 0s", "@every 0h0m", "@every 5", "@every 5x", "@every -5m", "@every 1d", "@every 1 h"],
)
def test_invalid_every(expression: str) -> None:
    with pytest.raises(CronError, match="@every"):
        parse_schedule(expression)


# --- timezones (§5.1) ------------------------------------------------------------------------


def test_tokyo_nine_am_is_midnight_utc() -> None:
    assert runs("0 9 * * *", THURSDAY, 2, TOKYO) == [at(2026, 2, 13, 0), at(2026, 2, 14, 0)]


def test_new_york_nine_am_follows_daylight_saving() -> None:
    assert next_run("0 9 * * *", THURSDAY, NEW_YORK) == at(2026, 2, 12, 14)  # EST
    assert next_run("0 9 * * *", at(2026, 7, 1), NEW_YORK) == at(2026, 7, 1, 13)  # EDT
    # Across spring-forward (2026-03-08) the UTC hour moves from 14 to 13.
    assert runs("0 9 * * *", at(2026, 3, 7, 0), 2, NEW_YORK) == [at(2026, 3, 7, 14), at(2026, 3, 8, 13)]


def test_results_are_utc() -> None:
    found = next_run("0 9 * * *", THURSDAY, NEW_YORK)
    assert found.tzinfo is UTC


def test_after_in_another_zone_is_the_same_instant() -> None:
    local_after = THURSDAY.astimezone(TOKYO)
    assert next_run("0 9 * * *", local_after, NEW_YORK) == next_run("0 9 * * *", THURSDAY, NEW_YORK)


def test_local_day_boundary_is_the_zones() -> None:
    # 2026-02-12T20:00Z is already Friday the 13th, 05:00 in Tokyo.
    assert next_run("0 6 * * 5", at(2026, 2, 12, 20), TOKYO) == at(2026, 2, 12, 21)


@pytest.mark.parametrize(
    "name", ["UTC", "GMT", "Asia/Tokyo", "America/New_York", "Europe/London", "Etc/GMT+5"]
)
def test_valid_timezones(name: str) -> None:
    assert validate_timezone(name) == ZoneInfo(name)


@pytest.mark.parametrize("name", ["+05:00", "-08:00", "UTC+5", "UTC-05:00", "GMT-3", "GMT0"])
def test_fixed_offsets_are_rejected(name: str) -> None:
    with pytest.raises(CronError, match="offset"):
        validate_timezone(name)


@pytest.mark.parametrize("name", ["EST", "PST", "CST", "MST", "EDT", "PDT", "CEST", "HST"])
def test_abbreviations_are_rejected(name: str) -> None:
    with pytest.raises(CronError, match="abbreviation"):
        validate_timezone(name)


@pytest.mark.parametrize(
    "name", ["Mars/Olympus_Mons", "asia/tokyo", " UTC", "localtime", "posixrules", "America"]
)
def test_unknown_names_are_rejected(name: str) -> None:
    with pytest.raises(CronError, match="not an IANA"):
        validate_timezone(name)


@pytest.mark.parametrize("name", [None, "", 5, ["UTC"]])
def test_non_string_timezones_are_rejected(name: object) -> None:
    with pytest.raises(CronError, match="timezone"):
        validate_timezone(name)


# --- daylight saving time (§5.2) ---------------------------------------------------------------


def test_spring_forward_skips_the_missing_time() -> None:
    # 2026-03-08 02:30 does not exist in New York: no run that day.
    assert runs("30 2 * * *", at(2026, 3, 7, 0), 2, NEW_YORK) == [
        at(2026, 3, 7, 7, 30),  # 02:30 EST
        at(2026, 3, 9, 6, 30),  # 02:30 EDT
    ]


def test_spring_forward_resumes_at_the_end_of_the_gap() -> None:
    # 02:00 is skipped; 03:00 EDT (07:00Z) is the very instant the clock jumps to.
    assert runs("0 * * * *", at(2026, 3, 8, 5, 30), 3, NEW_YORK) == [
        at(2026, 3, 8, 6, 0),  # 01:00 EST
        at(2026, 3, 8, 7, 0),  # 03:00 EDT
        at(2026, 3, 8, 8, 0),  # 04:00 EDT
    ]


def test_spring_forward_every_second() -> None:
    assert runs("* * * * * *", at(2026, 3, 8, 6, 59, 58), 3, NEW_YORK) == [
        at(2026, 3, 8, 6, 59, 59),  # 01:59:59 EST
        at(2026, 3, 8, 7, 0, 0),  # 03:00:00 EDT
        at(2026, 3, 8, 7, 0, 1),
    ]


def test_spring_forward_half_hour_gap() -> None:
    # Lord Howe Island springs forward 30 minutes: 02:00 -> 02:30 on 2026-10-04.
    lord_howe = ZoneInfo("Australia/Lord_Howe")
    after = datetime(2026, 10, 4, 1, 50, tzinfo=lord_howe)
    found = runs("*/10 * * * *", after, 2, lord_howe)
    assert [f.astimezone(lord_howe).strftime("%H:%M") for f in found] == ["02:30", "02:40"]
    assert found[0] - after == timedelta(minutes=10)


def test_fall_back_fires_once_at_the_first_occurrence() -> None:
    # 2026-11-01 01:30 happens at 05:30Z (EDT) and again at 06:30Z (EST).
    assert runs("30 1 * * *", at(2026, 10, 31, 12), 3, NEW_YORK) == [
        at(2026, 11, 1, 5, 30),  # 01:30 EDT, the first occurrence
        at(2026, 11, 2, 6, 30),  # 01:30 EST the next day
        at(2026, 11, 3, 6, 30),
    ]


def test_fall_back_second_pass_does_not_fire_again() -> None:
    schedule = parse_schedule("30 1 * * *")
    assert schedule.next_after(at(2026, 11, 1, 5, 30), NEW_YORK) == at(2026, 11, 2, 6, 30)
    # Asked from inside the repeated hour (01:10 EST), 01:30 has already fired.
    assert schedule.next_after(at(2026, 11, 1, 6, 10), NEW_YORK) == at(2026, 11, 2, 6, 30)


def test_fall_back_every_thirty_minutes_is_increasing_without_repeats() -> None:
    found = runs("*/30 * * * *", at(2026, 11, 1, 4, 0), 5, NEW_YORK)
    assert found == [
        at(2026, 11, 1, 4, 30),  # 00:30 EDT
        at(2026, 11, 1, 5, 0),  # 01:00 EDT
        at(2026, 11, 1, 5, 30),  # 01:30 EDT
        at(2026, 11, 1, 7, 0),  # 02:00 EST; 01:00 and 01:30 EST are repeats
        at(2026, 11, 1, 7, 30),
    ]
    assert found == sorted(set(found))
    local = [f.astimezone(NEW_YORK).replace(tzinfo=None) for f in found]
    assert len(local) == len(set(local))


def test_fall_back_from_inside_the_repeat_jumps_to_its_end() -> None:
    assert next_run("* * * * *", at(2026, 11, 1, 6, 10), NEW_YORK) == at(2026, 11, 1, 7, 0)
    assert next_run("0 3 * * *", at(2026, 11, 1, 6, 10), NEW_YORK) == at(2026, 11, 1, 8, 0)


# --- invalid expressions (§3.5) ------------------------------------------------------------------


@pytest.mark.parametrize("expression", ["not a valid cron", "0 0 0 0 0 0 0", "99 25 32 13 8"])
def test_conformance_invalid_expressions(expression: str) -> None:
    with pytest.raises(CronError):
        parse_schedule(expression)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("99 25 32 13 8", "minute value '99' is out of range 0-59"),
        ("60 * * * *", "minute"),
        ("* 24 * * *", "hour value '24'"),
        ("* * 0 * *", "day-of-month value '0'"),
        ("* * 32 * *", "day-of-month value '32'"),
        ("* * * 0 *", "month value '0'"),
        ("* * * 13 *", "month value '13'"),
        ("* * * * 8", "day-of-week value '8'"),
        ("60 * * * * *", "second value '60'"),
        ("*/0 * * * *", "minute step in '*/0' must be at least 1"),
        ("* */0 * * *", "hour step"),
        ("*/90 * * * *", "minute step in '*/90' must be at most 59"),
        ("30-10 * * * *", "minute range '30-10' runs backwards"),
        ("* * * * FRI-MON", "day-of-week range 'FRI-MON' runs backwards"),
        ("* * * FOO *", "month value 'FOO'"),
        ("* * * * FOO", "day-of-week value 'FOO'"),
        ("* * * JAN-FOO *", "month value 'FOO'"),
        ("* * * * JAN", "day-of-week value 'JAN'"),
        ("* * * MON *", "month value 'MON'"),
        ("1,,2 * * * *", "minute '' is not a value"),
        ("1- * * * *", "minute '1-'"),
        ("*/ * * * *", "minute '*/'"),
        ("*-5 * * * *", "minute '*-5'"),
        ("1/2/3 * * * *", "minute '1/2/3'"),
        ("*/x * * * *", "minute step in '*/x' is not a number"),
        ("L * * * *", "minute value 'L'"),
        ("* * 15W * 1W", "day-of-week value '1W'"),
        ("* * 0W * *", "day-of-month value '0'"),
        ("* * 32W * *", "day-of-month value '32'"),
        ("* * L/2 * *", "day-of-month value 'L'"),
        ("* * * * 5#6", "day-of-week '5#6': the number after '#' must be 1-5"),
        ("* * * * 5#0", "day-of-week '5#0'"),
        ("* * * * 8#1", "day-of-week value '8'"),
        ("* * * * 9L", "day-of-week value '9'"),
        ("* * * * L", "day-of-week 'L' needs a weekday"),
        ("* * * * 5L/2", "day-of-week value '5L'"),
        ("* * * L *", "month value 'L'"),
        ("* * * * * * *", "got 7"),
        ("* * * *", "got 4"),
        ("@fortnightly", "unknown special expression '@fortnightly'"),
        ("@daily 5", "unknown special expression"),
    ],
)
def test_error_messages_name_the_field(expression: str, fragment: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_schedule(expression)
    assert fragment in str(caught.value)


@pytest.mark.parametrize("expression", ["", "   ", None, 5, ["* * * * *"]])
def test_empty_or_non_string_expressions(expression: object) -> None:
    with pytest.raises(CronError, match="cron expression must"):
        parse_schedule(expression)


def test_cron_error_is_a_value_error() -> None:
    assert issubclass(CronError, ValueError)


def test_naive_datetimes_are_a_programming_error() -> None:
    schedule = parse_schedule("@daily")
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.next_after(datetime(2026, 1, 1), UTC)
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_schedule("@every 1h").next_after(THURSDAY, UTC, anchor=datetime(2026, 1, 1))
