"""The binding's media type (ojs-http-binding §4) and body limits."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer

from ..conf import ojs_settings
from ..protocol.envelope import UNSTORABLE
from ..protocol.errors import InvalidPayload, InvalidRequest, OJSError, PayloadTooLarge

OJS_MEDIA_TYPE = "application/openjobspec+json"
# Twice the envelope's own limit on args and meta (ojs-json-format §13.5):
# room for the fields around them, far from Python's recursion limit.
MAX_BODY_DEPTH = 64


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
        return render_json(data)


def render_json(data: Any) -> bytes:
    """A response body as the binding sends it: compact UTF-8 JSON (nothing for None)."""
    if data is None:
        return b""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


class OJSContentNegotiation(DefaultContentNegotiation):
    """One representation, whatever the request's Accept (ojs-http-binding §4.3).

    The binding has a single media type, so there is nothing to negotiate: DRF's
    406 (and its ``?format=`` override) would refuse clients that send
    ``Accept: application/json`` or ``text/html``. Bodies are still parsed by
    their Content-Type.
    """

    def select_renderer(self, request: Any, renderers: list, format_suffix: str | None = None) -> tuple:
        return renderers[0], renderers[0].media_type


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
        # The view may check cheaper things first (a batch: its job count).
        getattr(view, "admit_body", check_storable)(data)
        return data


def check_storable(data: Any, *, where: str = "", max_bytes: int | None = None) -> None:
    """Refuse JSON no store can keep or render back: it would fail later, as a 500.

    Nesting beyond MAX_BODY_DEPTH, numbers that overflow to infinity
    (``1e999``), NUL characters and unpaired surrogates, in values or keys;
    with ``max_bytes``, a value whose compact UTF-8 encoding is larger (the
    walk stops as soon as it is). One iterator per level of nesting and no
    copy of anything: a body of millions of elements costs a few frames of
    memory, and the path of a bad value is spelt only when it is refused.
    """
    size = 0
    # One frame per open container: its items, whether they are (key, value)
    # pairs, and [the key or index of the item being checked].
    frames: list[tuple[Iterator[Any], bool, list[Any]]] = []
    value = data
    while True:
        if isinstance(value, str):
            if UNSTORABLE.search(value):
                check_string(value, _path(where, frames))
            if max_bytes is not None:
                size += _encoded_size(value, max_bytes - size)
        elif isinstance(value, (dict, list)):
            if len(frames) >= MAX_BODY_DEPTH:
                raise InvalidPayload(f"the request body is nested deeper than {MAX_BODY_DEPTH} levels")
            size += 1 + max(len(value), 1)  # brackets and commas
            is_dict = isinstance(value, dict)
            frames.append((iter(value.items() if is_dict else value), is_dict, [None]))
        elif isinstance(value, float) and not math.isfinite(value):
            at = _path(where, frames)
            raise InvalidRequest(f"{at or 'the body'} is a number too large to represent", field=at or None)
        elif max_bytes is not None:
            size += len(_SCALARS[value]) if value is None or isinstance(value, bool) else len(repr(value))
        if max_bytes is not None and size > max_bytes:
            raise PayloadTooLarge(
                f"{where or 'the job'} is larger than {max_bytes} bytes",
                details={"max_size": max_bytes},
            )
        # The next value: the next item of the innermost container not yet exhausted.
        while frames:
            items, is_dict, position = frames[-1]
            item = next(items, _END)
            if item is _END:
                frames.pop()
                continue
            if is_dict:
                key, value = item
                position[0] = key
                if UNSTORABLE.search(key):
                    check_string(key, _path(where, frames))
                if max_bytes is not None:
                    size += _encoded_size(key, max_bytes - size) + 1  # and the colon
            else:
                value = item
                position[0] = 0 if position[0] is None else position[0] + 1
            break
        else:
            return


_END = object()
_SCALARS = {None: "null", True: "true", False: "false"}


def check_each_storable(items: list[Any], name: str, *, max_bytes: int) -> None:
    """``check_storable`` for each item of a batch body's array ``name``, each within ``max_bytes``.

    A body of up to a batch's size can hold millions of elements; no item's walk
    goes past ``max_bytes`` of it. The refused item's index is in ``details.index``.
    """
    for index, item in enumerate(items):
        try:
            # As sent: UTF-8, not \uXXXX escapes, which triple non-ASCII text.
            check_storable(item, where=f"{name}[{index}]", max_bytes=max_bytes)
        except OJSError as exc:
            exc.details.setdefault("index", index)
            raise


def admit_items(data: Any, name: str, check_count: Callable[[list[Any]], None]) -> None:
    """A batch body's refusals, cheap ones first: the count of its array ``name``
    (``check_count``), then each item's size, then the rest of the body. A body
    without the array is checked whole: the view's parser then names the fault."""
    items = data.get(name) if isinstance(data, dict) else None
    if not isinstance(items, list):
        check_storable(data)
        return
    check_count(items)
    check_each_storable(items, name, max_bytes=ojs_settings.MAX_ENVELOPE_BYTES)
    check_storable({key: value for key, value in data.items() if key != name})


def _encoded_size(text: str, budget: int) -> int:
    """Bytes of a string in compact JSON, as sent: quoted, escaped, UTF-8.

    A string longer than the budget is over it without being encoded (a
    character is at least a byte): its length is enough of an answer.
    """
    if len(text) + 2 > budget:
        return len(text) + 2
    encoded = encode_basestring(text)
    return len(encoded) if encoded.isascii() else len(encoded.encode("utf-8"))


def _path(where: str, frames: list[tuple[Iterator[Any], bool, list[Any]]]) -> str:
    """Where the value being checked sits, as ``jobs[3].args[0].name``."""
    path = where
    for _, is_dict, (step,) in frames:
        if is_dict:
            path = f"{path}.{step}" if path else step
        else:
            path += f"[{step}]"
    return path


def check_string(value: str, where: str) -> None:
    """Refuse a string holding a NUL or an unpaired surrogate, naming where it was."""
    found = UNSTORABLE.search(value)
    if found:
        what = "a NUL character" if found.group() == "\x00" else "an unpaired UTF-16 surrogate"
        where = where.encode("unicode_escape").decode("ascii")
        raise InvalidRequest(f"{where or 'the body'} contains {what}, which cannot be stored", field=where or None)


class PlainJSONParser(OJSParser):
    """``application/json`` is an alias the binding requires servers to accept (§4.1)."""

    media_type = "application/json"
