"""The binding's media type (ojs-http-binding §4) and body limits."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer

from ..conf import ojs_settings
from ..protocol.errors import InvalidPayload, PayloadTooLarge
from ..protocol.storable import MAX_BODY_DEPTH, check_each_storable, check_storable, reject_constant

OJS_MEDIA_TYPE = "application/openjobspec+json"


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
            data = json.loads(raw.decode("utf-8"), parse_constant=reject_constant)
        except UnicodeDecodeError:
            raise InvalidPayload("the request body is not UTF-8 encoded JSON") from None
        except ValueError as exc:
            raise InvalidPayload(f"the request body is not valid JSON: {exc}") from None
        except RecursionError:
            raise InvalidPayload(f"the request body is nested deeper than {MAX_BODY_DEPTH} levels") from None
        # The view may check cheaper things first (a batch: its job count).
        getattr(view, "admit_body", check_storable)(data)
        return data


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


class PlainJSONParser(OJSParser):
    """``application/json`` is an alias the binding requires servers to accept (§4.1)."""

    media_type = "application/json"
