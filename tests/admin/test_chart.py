"""The overview's per-minute chart, drawn on the server (pure: no database)."""

from __future__ import annotations

import datetime as dt
import re

from django_ojs.admin.chart import Series, _nice_ceiling, per_minute_bars

START = dt.datetime(2026, 2, 13, 11, 50, tzinfo=dt.UTC)
MINUTES = [START + dt.timedelta(minutes=index) for index in range(12)]


def draw(completed: list[int | None], failed: list[int | None]) -> str:
    return str(per_minute_bars(MINUTES, [Series("completed", "ok", completed), Series("failed", "bad", failed)]))


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


def test_labels_are_escaped():
    svg = str(per_minute_bars(MINUTES[:1], [Series("<script>", "x", [1])]))
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_nice_ceiling():
    assert [_nice_ceiling(v) for v in (0, 1, 2, 7, 11, 70, 101, 999, 5000)] == [1, 1, 2, 10, 20, 100, 200, 1000, 5000]
