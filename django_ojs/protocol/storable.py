"""JSON a job store can keep and render back (pure): what the HTTP door and the job search refuse.

JSON allows what no store can keep: nesting deep enough to exhaust a recursive
walk, numbers that overflow to infinity (``1e999``; Python's parser also reads
``NaN`` and ``Infinity``), and strings holding a NUL (PostgreSQL's text) or an
unpaired surrogate (UTF-8). Each would fail later, in the database or the
renderer, as a 500; refused here, naming where.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from json.encoder import encode_basestring
from typing import Any

from .errors import InvalidPayload, InvalidRequest, OJSError, PayloadTooLarge

# Twice the envelope's own limit on args and meta (ojs-json-format §13.5):
# room for the fields around them, far from Python's recursion limit.
MAX_BODY_DEPTH = 64
# JSON allows these in strings; neither PostgreSQL's text (NUL) nor UTF-8 (an unpaired
# surrogate) can store them: refused wherever a string is kept.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def reject_constant(name: str) -> Any:
    """``json.loads``'s ``parse_constant``: NaN, Infinity and -Infinity are no JSON."""
    raise ValueError(f"{name} is not valid JSON")


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
            if isinstance(value, dict):
                frames.append((iter(value.items()), True, [None]))
            else:
                frames.append((iter(value), False, [None]))
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
            item: Any = next(items, _END)
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
