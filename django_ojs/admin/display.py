"""How the console writes things: durations, moments, ids, states, JSON, links.

Every helper returns escaped HTML (``format_html``) or plain text, so the
admin's templates can place them as they are.

One format for a point in time on every screen: UTC to the second,
``2026-11-27 10:04:05Z`` (RFC 3339 with a space for the ``T``, which reads
better; ``Z`` says UTC), its distance from now beside it. ``moment`` is the
only way a page shows one; its ``<time>`` element carries the instant as the
HTTP API and ``manage.py ojs`` write it (``2026-11-27T10:04:05.123Z``), shown on
hover, so an operator can match a screen with a log line or an API reply.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from ..protocol.durations import format_timestamp

# A pretty-printed JSON value longer than this is cut: a 1 MiB argument list
# must not turn a job page into a 1 MiB page.
JSON_DISPLAY_LIMIT = 20_000
EMPTY = "—"
_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
# The characters of an id a list shows. A job's or a worker's id is a UUIDv7,
# whose first 12 characters are its creation time in milliseconds: jobs made
# in the same minute share their first 8. The last 8 are random bits, so they
# tell the rows of a page apart.
SHORT_ID_CHARS = 8
# An id that is not a UUID (a worker named by an SDK) is shown whole up to this
# length, else by its two ends.
LONG_ID_CHARS = 20
# Two overlapping sheets, drawn inline: no icon font, no image request.
COPY_ICON = mark_safe(
    '<svg class="ojs-copy-icon" viewBox="0 0 16 16" width="12" height="12" aria-hidden="true">'
    '<rect x="5" y="5" width="9" height="9" rx="1.5"/><path d="M3 11H2.5A1.5 1.5 0 0 1 1 9.5v-7A1.5 1.5 0 0 1 '
    '2.5 1h7A1.5 1.5 0 0 1 11 2.5V3"/></svg>'
)


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


def timestamp(value: dt.datetime) -> str:
    """The console's text of a point in time: ``2026-11-27 10:04:05Z`` (UTC, to the second)."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def moment(value: dt.datetime | None, now: dt.datetime, *, compact: bool = False) -> SafeString | str:
    """A point in time as every page shows it: ``2026-11-27 10:04:05Z (3 min ago)``.

    ``compact`` (a narrow list cell, a sentence) shows the distance alone,
    ``3 min ago`` or ``in 5 min``, with the time itself on hover. Either way the
    ``<time>`` element's ``datetime`` is the instant in the API's format.
    """
    if value is None:
        return EMPTY
    machine = format_timestamp(value)
    if compact:
        return format_html(
            '<time class="ojs-moment" datetime="{}" title="{}">{}</time>', machine, timestamp(value), _distance(value, now)
        )
    return format_html(
        '<time class="ojs-moment" datetime="{}" title="{}">{}</time> <span class="ojs-ago">({})</span>',
        machine, machine, timestamp(value), _distance(value, now),
    )


def day(value: dt.datetime) -> SafeString:
    """A far point in time in a narrow list cell: its UTC date, the whole time on hover (a retention's end)."""
    return format_html(
        '<time class="ojs-moment" datetime="{}" title="{}">{}</time>',
        format_timestamp(value), timestamp(value), value.astimezone(dt.UTC).strftime("%Y-%m-%d"),
    )


def moment_field(name: str, description: str) -> Any:
    """A column of a ModelAdmin showing the datetime field ``name`` as a ``moment``.

    Measured against the row's ``db_now`` (the database's clock) where its
    queryset carries one, else this server's clock.
    """

    def column(model_admin: admin.ModelAdmin, obj: Any) -> SafeString | str:
        now = getattr(obj, "db_now", None) or timezone.now()
        return moment(getattr(obj, name), now)

    return admin.display(description=description, ordering=name)(column)


def _distance(value: dt.datetime, now: dt.datetime) -> str:
    """'3 min ago', 'in 5 h', 'now': the largest unit alone, the exact time being beside it or on hover."""
    delta = value - now
    if abs(delta) < dt.timedelta(seconds=1):
        return "now"
    said = human_duration(delta, precise=False)
    return f"in {said}" if delta > dt.timedelta(0) else f"{said} ago"


def breakable(name: object) -> SafeString:
    """A name (a job type, a queue, a host) that may wrap after its dots, dashes, underscores and slashes.

    A narrow column then breaks ``billing.invoice.render_statement`` at its
    parts, never inside a word, and never widens the list beyond the window.
    """
    parts = re.split(r"(?<=[._/:-])", str(name))
    return format_html_join(mark_safe("<wbr>"), "{}", ((part,) for part in parts))


def short_id(value: object) -> str:
    """The part of an id a list shows: a UUID's last 8 characters, a long name's two ends."""
    text = str(value)
    try:
        uuid.UUID(text)
    except ValueError:
        if len(text) <= LONG_ID_CHARS:
            return text
        return f"{text[:SHORT_ID_CHARS]}…{text[-SHORT_ID_CHARS:]}"
    return f"…{text[-SHORT_ID_CHARS:]}"


def id_cell(value: object, url: str | None = None) -> SafeString:
    """An id in a list: its short form in monospace (a link to ``url``), the whole on hover, a copy button.

    The button (``static/django_ojs/admin/copy.js``) copies the full id, for
    the search box, a log search or the API.
    """
    full = str(value)
    code = format_html('<code class="ojs-id" title="{}">{}</code>', full, short_id(full))
    shown = format_html('<a href="{}">{}</a>', url, code) if url else code
    return format_html(
        '<span class="ojs-id-cell">{}<button type="button" class="ojs-copy" data-ojs-copy="{}" '
        'title="Copy the full id" aria-label="Copy the full id {}">{}</button></span>',
        shown, full, full, COPY_ICON,
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
