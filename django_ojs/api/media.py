"""The binding's media type (ojs-http-binding §4) and body limits."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer

from ..conf import ojs_settings
from ..errors import InvalidPayload, PayloadTooLarge

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
            return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError:
            raise InvalidPayload("the request body is not UTF-8 encoded JSON") from None
        except ValueError as exc:
            raise InvalidPayload(f"the request body is not valid JSON: {exc}") from None


class PlainJSONParser(OJSParser):
    """``application/json`` is an alias the binding requires servers to accept (§4.1)."""

    media_type = "application/json"
