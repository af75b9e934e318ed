"""Offset pagination with opaque cursors (ojs-http-binding §17)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..conf import ojs_settings
from ..errors import InvalidRequest

MAX_OFFSET = 10**9


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
    limit = _int_param(params, "limit", ojs_settings.PAGE_SIZE)
    if not 1 <= limit <= ojs_settings.MAX_PAGE_SIZE:
        raise InvalidRequest(f"limit must be from 1 to {ojs_settings.MAX_PAGE_SIZE}", field="limit")
    if params.get("cursor"):
        offset = decode_cursor(params["cursor"])
    else:
        offset = _int_param(params, "offset", 0)
    if offset < 0:
        raise InvalidRequest("offset must not be negative", field="offset")
    if offset > MAX_OFFSET:
        # Beyond it the database refuses the OFFSET itself (bigint out of range).
        raise InvalidRequest(f"offset must be at most {MAX_OFFSET}", field="offset")
    return Page(limit=limit, offset=offset)


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        offset = json.loads(base64.urlsafe_b64decode(padded.encode()))["o"]
    except (ValueError, KeyError, TypeError):
        raise InvalidRequest("cursor is not one this server issued", field="cursor") from None
    if not isinstance(offset, int) or offset < 0:
        raise InvalidRequest("cursor is not one this server issued", field="cursor")
    return offset


def _int_param(params: Mapping[str, str], name: str, default: int) -> int:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidRequest(f"{name} must be an integer", field=name) from None
