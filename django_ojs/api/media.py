"""The binding's media type (ojs-http-binding §4) and body limits."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer

from ..conf import ojs_settings
from ..errors import InvalidPayload, InvalidRequest, PayloadTooLarge

OJS_MEDIA_TYPE = "application/openjobspec+json"
# Twice the envelope's own limit on args and meta (ojs-json-format §13.5):
# room for the fields around them, far from Python's recursion limit.
MAX_BODY_DEPTH = 64
# JSON allows these in strings; neither PostgreSQL (NUL) nor UTF-8 (an
# unpaired surrogate) can store them.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class OJSRenderer(BaseRenderer):
    """Compact JSON labelled with the configured media type, without a charset parameter.

    The conformance cases compare Content-Type exactly; the Python SDK wants
    "application/json" (``OJS["RESPONSE_MEDIA_TYPE"]``).
    """

    media_type = OJS_MEDIA_TYPE
    format = "json"
    charset = None

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: dict | None = None) -> bytes:
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = ojs_settings.RESPONSE_MEDIA_TYPE
        if data is None:
            return b""
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class OJSParser(BaseParser):
    """JSON bodies as ``application/openjobspec+json``; the view sets the size limit."""

    media_type = OJS_MEDIA_TYPE

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        view = (parser_context or {}).get("view")
        limit = getattr(view, "max_body_bytes", None) or ojs_settings.MAX_ENVELOPE_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(
                f"the request body is larger than {limit} bytes", details={"max_size": limit}
            )
        if view is not None:
            view.body_size = len(raw)
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError:
            raise InvalidPayload("the request body is not UTF-8 encoded JSON") from None
        except ValueError as exc:
            raise InvalidPayload(f"the request body is not valid JSON: {exc}") from None
        except RecursionError:
            raise InvalidPayload(f"the request body is nested deeper than {MAX_BODY_DEPTH} levels") from None
        check_storable(data)
        return data


def check_storable(data: Any) -> None:
    """Refuse JSON no store can keep or render back: it would fail later, as a 500.

    Nesting beyond MAX_BODY_DEPTH, numbers that overflow to infinity
    (``1e999``), NUL characters and unpaired surrogates, in values or keys.
    Walks iteratively, so the depth of the body costs no stack.
    """
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_BODY_DEPTH:
            raise InvalidPayload(f"the request body is nested deeper than {MAX_BODY_DEPTH} levels")
        if isinstance(value, str):
            check_string(value, where)
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidRequest(f"{where or 'the body'} is a number too large to represent", field=where or None)
        elif isinstance(value, dict):
            for key, item in value.items():
                path = f"{where}.{key}" if where else key
                check_string(key, path)
                stack.append((item, path, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value))


def check_string(value: str, where: str) -> None:
    """Refuse a string holding a NUL or an unpaired surrogate, naming where it was."""
    found = _UNSTORABLE.search(value)
    if found:
        what = "a NUL character" if found.group() == "\x00" else "an unpaired UTF-16 surrogate"
        where = where.encode("unicode_escape").decode("ascii")
        raise InvalidRequest(f"{where or 'the body'} contains {what}, which cannot be stored", field=where or None)


class PlainJSONParser(OJSParser):
    """``application/json`` is an alias the binding requires servers to accept (§4.1)."""

    media_type = "application/json"
