"""How the console writes things: durations, moments, states, JSON, links.

Every helper returns escaped HTML (``format_html``) or plain text, so the
admin's templates can place them as they are.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..protocol.durations import format_timestamp

# A pretty-printed JSON value longer than this is cut: a 1 MiB argument list
# must not turn a job page into a 1 MiB page.
JSON_DISPLAY_LIMIT = 20_000
EMPTY = "—"
_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))


def human_duration(delta: dt.timedelta, *, precise: bool = True) -> str:
    """A duration in its two largest units ('3 min 12 s', '3 d 4 h'), or its largest alone."""
    seconds = int(abs(delta.total_seconds()))
    for index, (name, size) in enumerate(_UNITS[:-1]):
        if seconds >= size:
            major, rest = divmod(seconds, size)
            minor_name, minor_size = _UNITS[index + 1]
            minor = rest // minor_size
            return f"{major} {name} {minor} {minor_name}" if minor and precise else f"{major} {name}"
    return f"{seconds} s"


def relative(moment: dt.datetime | None, now: dt.datetime, *, precise: bool = True) -> str:
    """'3 min 12 s ago' or 'in 3 min 12 s' ('3 min ago' when not ``precise``)."""
    if moment is None:
        return EMPTY
    delta = moment - now
    if abs(delta) < dt.timedelta(seconds=1):
        return "now"
    said = human_duration(delta, precise=precise)
    return f"in {said}" if delta > dt.timedelta(0) else f"{said} ago"


def moment(value: dt.datetime | None, now: dt.datetime) -> SafeString | str:
    """An RFC 3339 timestamp with its distance from now."""
    if value is None:
        return EMPTY
    return format_html(
        '<time datetime="{}">{}</time> <span class="ojs-quiet">({})</span>',
        format_timestamp(value),
        format_timestamp(value),
        relative(value, now),
    )


def state_badge(state: str) -> SafeString:
    return format_html('<span class="ojs-state ojs-state-{}">{}</span>', state, state)


def pretty_json(value: Any, limit: int = JSON_DISPLAY_LIMIT) -> SafeString:
    """Indented JSON in a <pre>, cut at ``limit`` characters with a note saying so."""
    if value is None:
        return format_html('<span class="ojs-quiet">{}</span>', "none")
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    if len(text) <= limit:
        return format_html('<pre class="ojs-json">{}</pre>', text)
    return format_html(
        '<pre class="ojs-json">{}</pre><p class="ojs-truncated">Cut at {} of {} characters.</p>',
        text[:limit],
        f"{limit:,}",
        f"{len(text):,}",
    )


def admin_changelist_url(model_name: str, **filters: Any) -> str:
    """The changelist of one of this app's models, filtered by ``filters``."""
    url = reverse(f"admin:django_ojs_{model_name}_changelist")
    return f"{url}?{urlencode(filters)}" if filters else url


def link(url: str, text: Any, title: str = "") -> SafeString:
    if title:
        return format_html('<a href="{}" title="{}">{}</a>', url, title, text)
    return format_html('<a href="{}">{}</a>', url, text)
