"""What the docs quote django-ojs saying is what it says.

A reader who searches the admin or a log for a line a page quotes must find
it. The reaper's absence is quoted on several pages (the overview's red line,
the worker's warning at start): each quote starting "no reaper" is the start
of one of the lines the code writes, a number standing for any number.
"""

from __future__ import annotations

import datetime as dt
import logging
import re

import pytest

from django_ojs.admin.overview import reaper_status
from django_ojs.core.clock import db_now
from django_ojs.models import ReaperTick
from django_ojs.worker.runtime import Runtime, WorkerConfig

from .samples import pages

QUOTE = re.compile(r'"((?i:no reaper)[^"]*)"')


def quoted_about_the_reaper() -> list[tuple[str, str]]:
    return [(str(page.name), quote) for page in pages() for quote in QUOTE.findall(page.read_text())]


def said(text: str, quote: str) -> bool:
    """Whether ``quote`` is how ``text`` begins, N or a number standing for any number."""
    pattern = "".join(
        "[0-9]+" if piece in ("N",) or piece.isdigit() else re.escape(piece)
        for piece in re.split(r"(\bN\b|[0-9]+)", quote.rstrip(".…?"))
    )
    return re.match(pattern, text) is not None


@pytest.fixture
def reaper_lines(db, caplog) -> list[str]:
    """Every line the code writes about a missing reaper: the overview's two, the worker's warning."""
    now = db_now()
    lines = [reaper_status(now).text]
    ReaperTick.objects.create(id="gone", started_at=now - dt.timedelta(hours=1),
                              last_tick_at=now - dt.timedelta(minutes=2))
    lines.append(reaper_status(now).text)
    with caplog.at_level(logging.WARNING):
        Runtime(WorkerConfig(queues=("default",), concurrency=1))._warn_if_no_reaper()
    lines += [record.getMessage() for record in caplog.records]
    return lines


def test_the_pages_quote_the_reaper_lines_as_they_are_written(reaper_lines):
    quotes = quoted_about_the_reaper()
    assert len(quotes) >= 3 and len(reaper_lines) == 3, (quotes, reaper_lines)
    wrong = [f"{page}: {quote!r}" for page, quote in quotes if not any(said(line, quote) for line in reaper_lines)]
    assert not wrong, "quoted, but no line says it:\n" + "\n".join(wrong) + "\nthe lines:\n" + "\n".join(reaper_lines)
