"""A bar chart of figures per minute, hour or day, drawn on the server as inline SVG (pure).

No JavaScript and no build step: the overview embeds the markup. Each slot
has one bar per series side by side and a hover title with the exact
figures; a slot the data did not reach (None) is drawn as a hatched gap,
never as a zero.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

WIDTH = 760
HEIGHT = 220
# Room for the axis labels.
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 28, 26


@dataclass(frozen=True)
class Series:
    label: str
    css_class: str
    values: list[int | None]


@dataclass(frozen=True)
class Slots:
    """How a chart of one slot length speaks: its summary, which slots get an axis label, its time formats."""

    summary: str
    labelled: Callable[[dt.datetime], bool]
    axis: str
    hover: str


MINUTES = Slots("Per minute over the last hour", lambda at: at.minute % 10 == 0, "%H:%M", "%H:%M UTC")
HOURS = Slots("Per hour over the last day", lambda at: at.hour % 6 == 0, "%H:00", "%Y-%m-%d %H:00 UTC")
DAYS = Slots("Per day over the last 30 days", lambda at: at.toordinal() % 5 == 0, "%m-%d", "%Y-%m-%d")


def bars(starts: list[dt.datetime], series: list[Series], slots: Slots = MINUTES) -> SafeString:
    """The SVG markup of ``series`` over the slots beginning at ``starts`` (all lists the same length)."""
    count = len(starts)
    peak = max((value for line in series for value in line.values if value), default=0)
    top = _nice_ceiling(peak)
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / max(count, 1)
    bar = max(slot / (len(series) + 1), 1.0)

    def y(value: int) -> float:
        return TOP + plot_height * (1 - value / top)

    parts: list[SafeString] = []
    for level in sorted({0, round(top / 2), top}):
        parts.append(
            format_html(
                '<line class="ojs-grid" x1="{}" x2="{}" y1="{}" y2="{}"/>'
                '<text class="ojs-axis" x="{}" y="{}" text-anchor="end">{}</text>',
                LEFT, WIDTH - RIGHT, _n(y(level)), _n(y(level)), LEFT - 6, _n(y(level) + 4), f"{level:,}",
            )
        )
    for index, start in enumerate(starts):
        x0 = LEFT + index * slot
        figures = [line.values[index] for line in series]
        if all(value is None for value in figures):
            parts.append(
                format_html(
                    '<rect class="ojs-unknown" x="{}" y="{}" width="{}" height="{}"/>',
                    _n(x0), TOP, _n(slot), plot_height,
                )
            )
        for position, (line, value) in enumerate(zip(series, figures)):
            if not value:
                continue
            height = max(plot_height * value / top, 1.0)
            parts.append(
                format_html(
                    '<rect class="{}" x="{}" y="{}" width="{}" height="{}"/>',
                    line.css_class, _n(x0 + bar * (position + 0.5)), _n(TOP + plot_height - height), _n(bar), _n(height),
                )
            )
        parts.append(
            format_html(
                '<rect class="ojs-hover" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
                _n(x0), TOP, _n(slot), plot_height, _hover_text(start, series, figures, slots),
            )
        )
        if slots.labelled(start):
            parts.append(
                format_html(
                    '<text class="ojs-axis" x="{}" y="{}" text-anchor="middle">{}</text>',
                    _n(x0 + slot / 2), HEIGHT - 8, start.strftime(slots.axis),
                )
            )
    legend = format_html_join(
        " ", '<tspan class="{}-legend">■ {}</tspan>', [(line.css_class, line.label) for line in series]
    )
    return format_html(
        '<svg class="ojs-chart" viewBox="0 0 {} {}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg">'
        '<text class="ojs-axis" x="{}" y="{}">{}</text>{}</svg>',
        WIDTH, HEIGHT, _summary(series, slots), LEFT, 14, legend, format_html_join("", "{}", ((part,) for part in parts)),
    )


def _n(number: float) -> str:
    """A coordinate with one decimal (format_html escapes its arguments, so it cannot format numbers)."""
    return f"{number:.1f}"


def _hover_text(start: dt.datetime, series: list[Series], figures: list[int | None], slots: Slots) -> str:
    said = ", ".join(
        f"{'not counted' if value is None else f'{value:,}'} {line.label}" for line, value in zip(series, figures)
    )
    return f"{start.strftime(slots.hover)}: {said}"


def _summary(series: list[Series], slots: Slots) -> str:
    totals = ", ".join(f"{sum(v for v in line.values if v):,} {line.label}" for line in series)
    return f"{slots.summary}: {totals}"


def _nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5 × 10^n at or above ``value`` (at least 1)."""
    if value <= 1:
        return 1
    magnitude = 10 ** (len(str(value)) - 1)
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude
