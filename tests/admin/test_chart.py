"""The overview's chart per minute, hour or day, drawn on the server (pure: no database)."""

from __future__ import annotations

import datetime as dt
import re

from django_ojs.admin.chart import DAYS, HOURS, Series, _nice_ceiling, bars

START = dt.datetime(2026, 2, 13, 11, 50, tzinfo=dt.UTC)
MINUTES = [START + dt.timedelta(minutes=index) for index in range(12)]


def draw(completed: list[int | None], failed: list[int | None]) -> str:
    return str(bars(MINUTES, [Series("completed", "ok", completed), Series("failed", "bad", failed)]))


def test_each_minute_has_a_bar_per_non_zero_figure_and_a_hover_title():
    svg = draw([3] * 12, [0] * 11 + [1])
    assert svg.startswith('<svg class="ojs-chart"')
    assert len(re.findall(r'<rect class="ok"', svg)) == 12
    assert len(re.findall(r'<rect class="bad"', svg)) == 1
    assert "<title>12:01 UTC: 3 completed, 1 failed</title>" in svg
    assert 'aria-label="Per minute over the last hour: 36 completed, 1 failed"' in svg


def test_bars_are_scaled_to_a_round_ceiling():
    svg = draw([0] * 11 + [70], [0] * 12)
    assert ">100</text>" in svg and ">50</text>" in svg and ">0</text>" in svg


def test_minutes_not_counted_are_drawn_as_unknown_not_as_zero():
    svg = draw([None] * 4 + [5] * 8, [None] * 4 + [0] * 8)
    assert svg.count('class="ojs-unknown"') == 4
    assert "<title>11:50 UTC: not counted completed, not counted failed</title>" in svg


def test_every_tenth_minute_is_labelled():
    svg = draw([1] * 12, [0] * 12)
    assert ">12:00</text>" in svg and ">11:50</text>" in svg and ">11:55</text>" not in svg


def test_hours_are_labelled_every_six_hours_and_hovered_with_their_date():
    hours = [dt.datetime(2026, 2, 13, tzinfo=dt.UTC) + dt.timedelta(hours=index) for index in range(24)]
    svg = str(bars(hours, [Series("completed", "ok", [1] * 24)], HOURS))
    assert [label for label in ("00:00", "06:00", "12:00", "18:00", "03:00") if f">{label}</text>" in svg] == [
        "00:00", "06:00", "12:00", "18:00"]
    assert "<title>2026-02-13 07:00 UTC: 1 completed</title>" in svg
    assert 'aria-label="Per hour over the last day: 24 completed"' in svg


def test_days_are_labelled_every_fifth_day_and_hovered_with_their_date():
    days = [dt.datetime(2026, 2, 1, tzinfo=dt.UTC) + dt.timedelta(days=index) for index in range(30)]
    svg = str(bars(days, [Series("completed", "ok", [2] * 30)], DAYS))
    labels = re.findall(r">(\d\d-\d\d)</text>", svg)
    assert len(labels) == 6 and all(
        (dt.date(2026, int(label[:2]), int(label[3:])).toordinal() % 5 == 0) for label in labels)
    assert "<title>2026-02-14: 2 completed</title>" in svg
    assert 'aria-label="Per day over the last 30 days: 60 completed"' in svg


def test_labels_are_escaped():
    svg = str(bars(MINUTES[:1], [Series("<script>", "x", [1])]))
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_nice_ceiling():
    assert [_nice_ceiling(v) for v in (0, 1, 2, 7, 11, 70, 101, 999, 5000)] == [1, 1, 2, 10, 20, 100, 200, 1000, 5000]
