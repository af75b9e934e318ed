"""Offset pagination with opaque cursors (ojs-http-binding §17)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..conf import ojs_settings
from ..protocol.errors import InvalidRequest

MAX_OFFSET = 10**9
# Our cursors are ~24 characters; anything much longer was not issued here,
# and decoding it costs work (and JSON nested deep enough overflows the stack).
MAX_CURSOR_LENGTH = 64
# Long enough for any out-of-range value to get its range message; int() of
# thousands of digits raises ValueError.
_INTEGER = re.compile(r"-?[0-9]{1,30}")


@dataclass(frozen=True)
class Page:
    limit: int
    offset: int

    def slice(self, queryset: Any) -> tuple[list[Any], bool]:
        """The page's rows and whether more follow (one row of look-ahead, no COUNT)."""
        rows = list(queryset[self.offset : self.offset + self.limit + 1])
        return rows[: self.limit], len(rows) > self.limit

    def meta(self, has_more: bool, total: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"limit": self.limit, "offset": self.offset, "has_more": has_more}
        if total is not None:
            out["total"] = total
        if has_more:
            out["next_cursor"] = encode_cursor(self.offset + self.limit)
        return out


def page_of(params: Mapping[str, str]) -> Page:
    limit = int_param(params, "limit", ojs_settings.PAGE_SIZE)
    if not 1 <= limit <= ojs_settings.MAX_PAGE_SIZE:
        raise InvalidRequest(f"limit must be from 1 to {ojs_settings.MAX_PAGE_SIZE}", field="limit")
    offset = decode_cursor(params["cursor"]) if params.get("cursor") else int_param(params, "offset", 0)
    if offset < 0:
        raise InvalidRequest("offset must not be negative", field="offset")
    if offset > MAX_OFFSET:
        # Beyond it the database refuses the OFFSET itself (bigint out of range).
        raise InvalidRequest(f"offset must be at most {MAX_OFFSET}", field="offset")
    return Page(limit=limit, offset=offset)


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    refused = InvalidRequest("cursor is not one this server issued", field="cursor")
    if len(cursor) > MAX_CURSOR_LENGTH:
        raise refused
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        offset = json.loads(base64.urlsafe_b64decode(padded.encode()))["o"]
    except (ValueError, KeyError, TypeError, RecursionError):
        raise refused from None
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise refused
    return offset


def int_param(params: Mapping[str, str], name: str, default: int) -> int:
    """An integer query parameter in ASCII digits (int() would also take " 5\n", "1_0", "٣")."""
    raw = params.get(name)
    if raw in (None, ""):
        return default
    if not _INTEGER.fullmatch(raw):
        raise InvalidRequest(f"{name} must be an integer", field=name)
    return int(raw)
