"""Every error leaves the HTTP door here, in the binding's error body (§16).

``{"error": {code, message, retryable, details, request_id, hint, docs_url}}``
with the status the binding gives the code. Unexpected exceptions become a
logged 500 ``backend_error``, never a bare HTML page.

An unreachable database is a 503 ``backend_unavailable`` with ``Retry-After``
(ojs-errors §5.1), also when it is the API key's lookup that failed. It is
logged once when the outage starts and once when a connection opens again
(``OutageWatch``), not with a traceback per request. SQLite locked past the busy
timeout is a 503 too, logged as a warning per request. Both are expected and
retried: Django's request logger is told they were logged (``ErrorReply.logged``),
or it adds an ERROR ("Service Unavailable") to each, which mails ``ADMINS``.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import DatabaseError, connections
from django.db.backends.signals import connection_created
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response
from uuid6 import uuid7

from ..conf import ojs_settings
from ..observe.outage import OutageWatch, is_busy, summary
from ..protocol.errors import Busy, InMaintenance, OJSError

# The binding's version this server speaks (OJS-Version on every response, ojs-http-binding §3.2).
OJS_VERSION = "1.0"


def new_request_id() -> str:
    return f"req_{uuid7()}"


logger = logging.getLogger("django_ojs.api")

# Seconds a client is asked to wait when the database is unreachable: about
# what a restart or a failover takes.
RETRY_AFTER = 5
# Seconds a client waits before it retries a request that lost to other writers.
BUSY_RETRY_AFTER = 1
database_outage = OutageWatch("api", logger, meanwhile="answering 503 until it is back")

STATUS = {
    "invalid_request": 400,
    "invalid_payload": 400,
    "schema_validation": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    # ojs-results §8.2: a blocking wait that ended before the job did.
    "timeout": 408,
    "conflict": 409,
    "duplicate": 409,
    "payload_too_large": 413,
    "validation_error": 422,
    "queue_paused": 422,
    "unsupported": 422,
    "rate_limited": 429,
    "queue_full": 429,
    "backend_error": 500,
    "backend_unavailable": 503,
}

HINTS = {
    "invalid_request": "Check the field named in details.field against the OJS HTTP binding.",
    "invalid_payload": "Send a JSON object encoded in UTF-8.",
    "unauthenticated": "Send 'Authorization: Bearer <API key>' with an active key; create one with manage.py ojs_create_api_key.",
    "forbidden": "Use an API key with the scope named in details.required_scope.",
    "not_found": "Check the id or name; finished jobs are pruned after their retention period.",
    "conflict": "details.current_state says what the job is now; fetch it again before retrying.",
    "duplicate": "A job with this id or unique key already exists; details.existing_job_id names it.",
    "queue_full": "The queue is at its max_size; retry after Retry-After seconds or raise the bound.",
    "payload_too_large": "Keep envelopes small: pass references to data, not the data itself.",
    "validation_error": "Fix the policy field named in the message.",
    "backend_error": "Retry later; the server logged the cause under this request_id.",
    "backend_unavailable": "The database is unreachable; retry later.",
    "timeout": "The job is still running: wait again, or poll GET /ojs/v1/jobs/{id}.",
}


def error_body(code: str, message: str, request_id: str, *, retryable: bool = False,
               details: dict[str, Any] | None = None, hint: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "code": code,
        "message": message,
        "retryable": retryable,
        "details": details or {},
        "request_id": request_id,
        "hint": hint or HINTS.get(code, "See the OJS HTTP binding, section 16."),
        "docs_url": ojs_settings.DOCS_URL,
    }
    if code == "validation_error":
        # The retry-policy conformance cases read error.type (ojs-errors §3).
        body["type"] = code
    return {"error": body}


def _from_drf(exc: drf.APIException) -> tuple[str, str, dict[str, Any]]:
    if isinstance(exc, (drf.NotAuthenticated, drf.AuthenticationFailed)):
        return "unauthenticated", str(exc.detail), getattr(exc, "ojs_details", {})
    if isinstance(exc, drf.PermissionDenied):
        return "forbidden", str(exc.detail), getattr(exc, "ojs_details", {})
    if isinstance(exc, drf.NotFound):
        return "not_found", str(exc.detail), {}
    if isinstance(exc, drf.MethodNotAllowed):
        return "method_not_allowed", str(exc.detail), {}
    if isinstance(exc, drf.UnsupportedMediaType):
        return (
            "invalid_request",
            f"{exc.detail} Send Content-Type: application/openjobspec+json (or application/json).",
            {"field": "Content-Type"},
        )
    if isinstance(exc, drf.ParseError):
        return "invalid_payload", str(exc.detail), {}
    if isinstance(exc, drf.Throttled):
        return "rate_limited", str(exc.detail), {}
    return "invalid_request", str(exc.detail), {}


class ErrorReply(NamedTuple):
    body: dict[str, Any]
    status: int
    headers: dict[str, str]
    # Logged here already, at the level it deserves: Django's request logger must not log it again.
    logged: bool = False


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER for every OJS view."""
    request = context.get("request")
    request_id = getattr(request, "ojs_request_id", "") if request is not None else ""
    where = f"{request.method} {request.path}" if request is not None else "a request"
    reply = error_reply(exc, request_id, where)
    return logged_if(Response(reply.body, status=reply.status, headers=reply.headers), reply.logged)


def logged_if(response: Any, logged: bool) -> Any:
    """``response``, marked as logged when ``logged``: Django's ``log_response`` skips a response
    whose ``_has_been_logged`` is set (its own mark against logging one twice)."""
    if logged:
        response._has_been_logged = True
    return response


def error_reply(exc: Exception, request_id: str, where: str) -> ErrorReply:
    """The error body, status and headers an exception becomes: for the DRF views and the lean ones alike.
    ``where`` names the request in a log line ("POST /ojs/v1/jobs")."""
    headers: dict[str, str] = {}
    logged = False
    if isinstance(exc, OJSError):
        code, message, details, hint, retryable = exc.code, exc.message, exc.details, exc.hint, exc.retryable
        if getattr(exc, "retry_after", None) is not None:
            headers["Retry-After"] = str(exc.retry_after)
        if isinstance(exc, (InMaintenance, Busy)):
            # Refusals by design (an operator's maintenance mode, a bound on this process's
            # slots): one line each, not an ERROR from Django's request logger for a 503.
            logger.log(logging.WARNING if isinstance(exc, Busy) else logging.INFO,
                       "%s: 503, to be retried (request %s): %s", where, request_id, message)
            logged = True
    elif isinstance(exc, Http404):
        code, message, details, hint, retryable = "not_found", "not found", {}, None, False
    elif isinstance(exc, drf.APIException):
        code, message, details = _from_drf(exc)
        hint, retryable = None, code == "rate_limited"
        if code == "unauthenticated":
            headers["WWW-Authenticate"] = 'Bearer realm="ojs"'
    elif isinstance(exc, SuspiciousOperation):
        # Django's own limits on a request, e.g. more query parameters than
        # DATA_UPLOAD_MAX_NUMBER_FIELDS (TooManyFieldsSent): the client's fault.
        code = "payload_too_large" if isinstance(exc, RequestDataTooBig) else "invalid_request"
        message, details, hint, retryable = str(exc), {}, None, False
    elif database_outage.failed(exc):
        # Logged once for the whole outage, and once when it ends.
        code, message, details, hint, retryable = (
            "backend_unavailable", "the database is unavailable", {"retry_after_seconds": RETRY_AFTER}, None, True)
        headers["Retry-After"] = str(RETRY_AFTER)
        logged = True
    elif is_busy(exc):
        # Rolled back whole, nothing written: the client's retry is the next try. Not an outage (the
        # database answers) and not a fault of ours to trace: one line, no traceback.
        logger.warning("%s: 503, to be retried (request %s): SQLite stayed locked by other writers past the "
                       "busy timeout (%s)", where, request_id, exc)
        logged = True
        code, message, details, hint, retryable = (
            "backend_unavailable", "the database is busy with other writers", {"retry_after_seconds": BUSY_RETRY_AFTER},
            _busy_hint(), True)
        headers["Retry-After"] = str(BUSY_RETRY_AFTER)
    else:
        logger.error("unexpected error (request %s): %s", request_id, summary(exc), exc_info=exc)
        message = (
            "the database reported an error"
            if isinstance(exc, DatabaseError)
            else "the server failed to handle this request"
        )
        code, details, hint, retryable = "backend_error", {}, None, True
    body = error_body(code, message, request_id, retryable=retryable, details=details, hint=hint)
    return ErrorReply(body, getattr(exc, "http_status", None) or STATUS.get(code, 400), headers, logged)


def _busy_hint() -> str:
    """What to do about SQLite's "database is locked": the W008 setting where it is missing; where it
    is set, writers did queue, and one held the lock past the others' timeout."""
    if (connections["default"].settings_dict.get("OPTIONS") or {}).get("transaction_mode") != "IMMEDIATE":
        return "Retry the request; on SQLite, set OPTIONS 'transaction_mode': 'IMMEDIATE' (manage.py check, W008)."
    return "Retry the request; another writer held SQLite's lock past the busy timeout (OPTIONS 'timeout')."


def json_error(code: str, message: str, status: int, *, hint: str | None = None) -> JsonResponse:
    """An error for paths no view answers (unknown URLs under /ojs/)."""
    request_id = new_request_id()
    response = JsonResponse(error_body(code, message, request_id, hint=hint), status=status)
    response["Content-Type"] = ojs_settings.RESPONSE_MEDIA_TYPE
    response["OJS-Version"] = OJS_VERSION
    response["X-Request-Id"] = request_id
    return response


def _database_reachable(sender: Any, **kwargs: Any) -> None:
    database_outage.succeeded()


connection_created.connect(_database_reachable, dispatch_uid="django_ojs.api.outage")
