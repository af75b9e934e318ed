"""What every OJS endpoint shares: media type, auth, headers, version negotiation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rest_framework.response import Response
from rest_framework.views import APIView

from ..protocol.errors import InvalidRequest, Unsupported
from ..protocol.storable import check_storable, check_string
from .auth import ApiKeyAuthentication, HasScope
from .errors import OJS_VERSION, exception_handler, new_request_id
from .media import OJSContentNegotiation, OJSParser, OJSRenderer, PlainJSONParser

_CLIENT_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")


def request_id_of(meta: Any) -> str:
    """The client's ``X-Request-Id`` when it is printable ASCII of at most 128 characters, else a new one."""
    given = meta.get("HTTP_X_REQUEST_ID", "")
    return given if _CLIENT_REQUEST_ID.fullmatch(given) else new_request_id()


def check_version(meta: Any) -> None:
    """Refuse an ``OJS-Version`` whose major version is not ours (§3.2)."""
    requested = meta.get("HTTP_OJS_VERSION")
    if requested and requested.split(".")[0].strip() != OJS_VERSION.split(".")[0]:
        raise Unsupported(
            f"OJS-Version {requested!r} is not supported; this server speaks {OJS_VERSION}",
            details={"supported_versions": [OJS_VERSION]},
        )


class LengthRequired(InvalidRequest):
    """A body sent in chunks, without a Content-Length: Django's WSGI request reads a body by its
    Content-Length, so it would be taken as empty -- a PUT of a configuration answered 200 having
    changed nothing. Refused instead, as HTTP's 411."""

    http_status = 411


def check_length(method: str, meta: Any) -> None:
    """Refuse a body announced by Transfer-Encoding without a Content-Length (``LengthRequired``)."""
    if method not in ("GET", "HEAD", "OPTIONS") and meta.get("HTTP_TRANSFER_ENCODING") and not meta.get("CONTENT_LENGTH"):
        raise LengthRequired(
            "the request body was sent in chunks (Transfer-Encoding) without a Content-Length, which this server "
            "does not read; send it with a Content-Length", hint="Send the body with a Content-Length header.",
        )


def check_query(params: Any) -> None:
    """Refuse a query string (a QueryDict) with a NUL: it would reach the database driver, which refuses it (a 500)."""
    for name, values in params.lists():
        for value in (name, *values):
            check_string(value, name)


def json_object(data: Any) -> dict[str, Any]:
    """A parsed request body, which must be a JSON object."""
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return data


@dataclass
class Reply:
    """What a POST endpoint answers, before any framework makes a response of it."""

    data: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


class OJSView(APIView):
    """Base of the binding's views.

    Sets the headers every response carries (§6.5), refuses an unsupported
    ``OJS-Version`` (§3.2) and maps errors in one place. Views name the scope
    they need and call the core; they hold no business rules.
    """

    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HasScope]
    parser_classes = [OJSParser, PlainJSONParser]
    renderer_classes = [OJSRenderer]
    content_negotiation_class = OJSContentNegotiation
    # The scope a key needs: one for the view, or one per HTTP method.
    required_scope: str | dict[str, str] = "read"
    max_body_bytes: int | None = None

    def initialize_request(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        request.ojs_request_id = request_id_of(request.META)
        drf_request = super().initialize_request(request, *args, **kwargs)
        drf_request.ojs_request_id = request.ojs_request_id
        return drf_request

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        # First, before credentials and long before the body: a method the view
        # does not serve is refused without reading what the client still sends.
        method = request.method.lower()
        if method not in self.http_method_names or not hasattr(self, method):
            self.http_method_not_allowed(request)
        check_version(request.META)
        check_length(request.method, request.META)
        super().initial(request, *args, **kwargs)
        check_query(request.query_params)
        if request.method == "POST":
            # Binding §4.1 and §6.1: every POST body is a JSON object of a
            # supported media type, also where the view reads none of it
            # (pause, activate, retry...): parse it before any view acts.
            self.body()

    def get_exception_handler(self):
        return exception_handler

    def finalize_response(self, request: Any, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        response["OJS-Version"] = OJS_VERSION
        response["X-Request-Id"] = getattr(request, "ojs_request_id", "") or new_request_id()
        return response

    def admit_body(self, data: Any) -> None:
        """Refuse a parsed body the store could not keep; the parser calls it before any view reads it."""
        check_storable(data)

    def body(self) -> dict[str, Any]:
        """The request body as a JSON object (an empty body is ``{}``)."""
        return json_object(self.request.data)


class AnsweringView(OJSView):
    """A view whose POST is ``answer(body)``: served by DRF's ``post`` here, and by api/lean.py for the hot three."""

    def answer(self, body: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def post(self, request: Any) -> Response:
        reply = self.answer(self.body())
        return Response(reply.data, status=reply.status, headers=reply.headers or None)
