"""Bearer API keys and per-operation scopes (ojs-http-binding §5).

401 when no valid key is sent, 403 when the key lacks the operation's scope.
With ``OJS["AUTH_REQUIRED"] = False`` every request is allowed (the demo on
localhost); a warning says so at every start.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from ..conf import ojs_settings
from ..keys import EXPIRED, INSPECT, grants
from ..models import ApiKey
from ..protocol.durations import format_timestamp

logger = logging.getLogger("django_ojs.api")

# How often a key's last_used_at is refreshed: not a write per request.
LAST_USED_RESOLUTION = dt.timedelta(minutes=1)
# The expired keys this process has logged a refusal of: one line per key, not one per request.
_expiry_logged: set[int] = set()


class ApiKeyUser:
    """The request's principal: the API key, with the user attributes DRF reads."""

    is_authenticated = True
    is_active = True

    def __init__(self, key: Any):
        self.key = key

    def __str__(self) -> str:
        return f"API key {self.key.prefix}"


def authenticated_key(meta: Any) -> Any:
    """The API key the request's ``Authorization`` header names, or None when it sends none.

    Raises ``AuthenticationFailed`` (a 401) for a malformed header or an unknown,
    revoked or expired key. With ``AUTH_REQUIRED`` off no header is read. Shared by the
    DRF views (``ApiKeyAuthentication``) and the lean hot endpoints (api/lean.py).
    """
    header = meta.get("HTTP_AUTHORIZATION", "")
    if not header or not ojs_settings.AUTH_REQUIRED:
        return None
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise exceptions.AuthenticationFailed("the Authorization header must be 'Bearer <API key>'")
    key = ApiKey.objects.verify(secret.strip())
    if key is None:
        raise exceptions.AuthenticationFailed("the API key is unknown or revoked")
    now = timezone.now()
    if key.status(now) == EXPIRED:
        refuse_expired(key)
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now  # the cached key too: one write a minute, not one a request
    return key


def refuse_expired(key: Any) -> None:
    """The 401 for a key past its ``expires_at``, logged the first time this process refuses it."""
    expired_at = format_timestamp(key.expires_at)
    if key.pk not in _expiry_logged:
        _expiry_logged.add(key.pk)
        logger.warning("API key %s… (%s) expired at %s: its requests are refused", key.prefix, key.name, expired_at)
    refused = exceptions.AuthenticationFailed(f"API key {key.prefix}… expired at {expired_at}")
    refused.ojs_details = {"expired_at": expired_at}
    raise refused


def check_scope(key: Any, required: str | dict[str, str], method: str) -> None:
    """Refuse a request whose key (None: none sent) lacks the scope ``required`` for ``method``.

    ``required`` is a view's ``required_scope``: one scope, or one per HTTP
    method. NotAuthenticated (401) without a key, PermissionDenied (403)
    naming the scope otherwise; nothing with ``AUTH_REQUIRED`` off.
    """
    if not ojs_settings.AUTH_REQUIRED:
        return
    if key is None:
        raise exceptions.NotAuthenticated("this endpoint requires 'Authorization: Bearer <API key>'")
    if isinstance(required, dict):
        # HEAD reads what GET reads; OPTIONS only describes the endpoint.
        method = "GET" if method == "HEAD" else method
        required = required.get(method, "read" if method == "OPTIONS" else "admin")
    if not grants(key.scopes, required):
        needed = "the 'read' or the 'admin' scope" if required == INSPECT else f"the '{required}' scope"
        denied = exceptions.PermissionDenied(f"API key {key.prefix}… lacks {needed} this operation needs")
        denied.ojs_details = {"required_scope": required, "key_scopes": key.scopes}
        raise denied


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[ApiKeyUser, Any] | None:
        key = authenticated_key(request.META)
        return None if key is None else (ApiKeyUser(key), key)

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="ojs"'


class HasScope(permissions.BasePermission):
    """The view's ``required_scope`` must be granted by the request's key."""

    def has_permission(self, request: Any, view: Any) -> bool:
        check_scope(request.auth, view.required_scope, request.method)
        return True
