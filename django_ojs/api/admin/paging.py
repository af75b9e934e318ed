"""Pages of the admin API's lists (ojs-admin-api §4.3): ``page`` and ``per_page``, and for jobs a cursor.

The document pages by number (``page``, ``per_page``; openapi also names
``limit`` and ``offset``). A page number is an OFFSET: the database reads and
drops every row before the page, so numbered pages stop at ``MAX_OFFSET``
rows. Jobs, which run to millions, also page by cursor: ``next_cursor`` names
the last row shown by its sort value and ``seq``, and the next page starts
after it (keyset), as cheap at the millionth row as at the first.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import F, Q, QuerySet

from ...protocol.durations import format_timestamp, parse_timestamp
from ...protocol.errors import InvalidRequest
from ..pagination import int_param

# The parameters ``page_of`` reads, and ``keyset_of``.
PAGE_PARAMS = ("page", "per_page", "limit", "offset")
KEYSET_PARAMS = ("sort", "order", "cursor")
DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 100
MAX_OFFSET = 10_000
MAX_CURSOR_LENGTH = 200
# ojs-admin-api §7.1 sort fields -> the column (creation order is insertion order: seq).
SORTS = {"created_at": "seq", "priority": "priority", "scheduled_at": "scheduled_at"}
NULLABLE = {"scheduled_at"}
# How a page's rows are read from one ordered query: (query, start, stop) -> rows.
Read = Callable[[Any, int, int], list[Any]]


@dataclass(frozen=True)
class Page:
    per_page: int
    page: int
    offset: int

    def slice(self, queryset: Any, read: Read | None = None) -> tuple[list[Any], bool]:
        """The page's rows and whether more follow (one row of look-ahead); ``read(queryset, start,
        stop)`` reads them where ``queryset[start:stop]`` would not do."""
        return self.slice_of_parts([queryset], read)

    def slice_of_parts(self, parts: Sequence[Any], read: Read | None = None) -> tuple[list[Any], bool]:
        """``slice`` of the rows of ``parts``, one after the other (``Keyset.parts``)."""
        skip, wanted, rows = self.offset, self.per_page + 1, []
        for part in parts:
            got = list(part[skip : skip + wanted]) if read is None else read(part, skip, skip + wanted)
            rows += got
            wanted -= len(got)
            if not wanted:
                break
            # This part held fewer rows than the page skips (none read): the next one skips the rest.
            skip = 0 if got else skip - part.order_by()[:skip].count()
        return rows[: self.per_page], len(rows) > self.per_page

    def meta(self, total: int, has_more: bool, *, exact: bool = True) -> dict[str, Any]:
        return {"total": total, "total_exact": exact, "page": self.page, "per_page": self.per_page,
                "has_more": has_more}


def page_of(params: Mapping[str, str]) -> Page:
    """``page``/``per_page`` (or openapi's ``offset``/``limit``), the offset bounded by ``MAX_OFFSET``."""
    for ours, openapis in (("per_page", "limit"), ("page", "offset")):
        if ours in params and openapis in params:
            raise InvalidRequest(f"{ours} and {openapis} both given: send one", field=openapis)
    sent = "per_page" if "per_page" in params or "limit" not in params else "limit"  # named as the client sent it
    per_page = int_param(params, sent, DEFAULT_PER_PAGE)
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise InvalidRequest(f"{sent} must be from 1 to {MAX_PER_PAGE}", field=sent)
    if "offset" in params and "page" not in params:
        offset = int_param(params, "offset", 0)
        if offset < 0:
            raise InvalidRequest("offset must not be negative", field="offset")
    else:
        page = int_param(params, "page", 1)
        if page < 1:
            raise InvalidRequest("page must be 1 or more", field="page")
        offset = (page - 1) * per_page
    if offset > MAX_OFFSET:
        raise InvalidRequest(
            f"pages by number reach {MAX_OFFSET:,} rows; beyond, follow next_cursor", field="page"
        )
    return Page(per_page, offset // per_page + 1, offset)


@dataclass(frozen=True)
class Keyset:
    """A sort order of jobs and the row the page starts after (None: the first page)."""

    sort: str
    descending: bool
    after: tuple[Any, int] | None = None

    def parts(self, queryset: QuerySet) -> list[QuerySet]:
        """``queryset`` in this order, as queries whose rows follow one another, after the cursor.

        A sort by a column that can be null is two: the jobs with a value, ordered by it, then those
        without, by seq (they come last either way). Each is an order an index gives: (scheduled_at,
        seq) of the jobs that have one, read forward or backward, and seq; NULLS LAST in one ORDER
        BY is an order no index gives in both directions, so every job was sorted."""
        column = SORTS[self.sort]
        seq = "-seq" if self.descending else "seq"
        if column == "seq":
            return [self._after(queryset, column).order_by(seq)]
        ordered = F(column).desc() if self.descending else F(column).asc()
        if column not in NULLABLE:
            return [self._after(queryset, column).order_by(ordered, seq)]
        after_a_value = self.after is None or self.after[0] is not None
        without = queryset.filter(**{f"{column}__isnull": True})
        parts = [without.order_by(seq) if after_a_value else self._after(without, column).order_by(seq)]
        if after_a_value:
            parts.insert(0, self._after(queryset.filter(**{f"{column}__isnull": False}), column).order_by(ordered, seq))
        return parts

    def _after(self, queryset: QuerySet, column: str) -> QuerySet:
        return queryset if self.after is None else queryset.filter(self._beyond(column, *self.after))

    def _beyond(self, column: str, value: Any, seq: int) -> Q:
        step = "lt" if self.descending else "gt"
        if column == "seq":
            return Q(**{f"seq__{step}": seq})
        if value is None:
            return Q(**{f"{column}__isnull": True, f"seq__{step}": seq})
        beyond = Q(**{f"{column}__{step}": value}) | Q(**{column: value, f"seq__{step}": seq})
        return beyond | Q(**{f"{column}__isnull": True}) if column in NULLABLE else beyond

    def cursor_after(self, row: Mapping[str, Any]) -> str:
        """The cursor of the page that follows ``row`` (a values() row with ``seq`` and the sort column)."""
        column = SORTS[self.sort]
        value = row[column] if column != "seq" else None
        if isinstance(value, dt.datetime):
            value = format_timestamp(value)
        raw = json.dumps({"s": self.sort, "d": int(self.descending), "v": value, "q": row["seq"]})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def keyset_of(params: Mapping[str, str]) -> Keyset:
    """``sort``, ``order`` and ``cursor``; a cursor must come from a page of the same sort and order."""
    sort = params.get("sort") or "created_at"
    if sort not in SORTS:
        raise InvalidRequest(f"sort must be one of {', '.join(SORTS)}", field="sort")
    order = params.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise InvalidRequest("order must be 'asc' or 'desc'", field="order")
    keyset = Keyset(sort, order == "desc")
    cursor = params.get("cursor")
    if not cursor:
        return keyset
    if "page" in params or "offset" in params:
        raise InvalidRequest("send cursor or page, not both", field="cursor")
    return Keyset(sort, keyset.descending, _decoded(cursor, keyset))


def _decoded(cursor: str, keyset: Keyset) -> tuple[Any, int]:
    refused = InvalidRequest("cursor is not one this server issued for this sort and order", field="cursor")
    if len(cursor) > MAX_CURSOR_LENGTH:
        raise refused
    try:
        data = json.loads(base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode()))
        sort, descending, value, seq = data["s"], data["d"], data["v"], data["q"]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise refused from None
    if (sort, descending) != (keyset.sort, int(keyset.descending)) or not _integer(seq):
        raise refused
    column = SORTS[sort]
    if column == "priority" and not _integer(value):
        raise refused
    if column in NULLABLE and value is not None:
        try:
            value = parse_timestamp(value, allow_relative=False)
        except ValueError:
            raise refused from None
    return value, seq


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
