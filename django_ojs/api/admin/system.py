"""The system (ojs-admin-api §12): maintenance mode, and the configuration in effect.

The configuration shows every ``OJS`` setting as this process reads it and
which database and engine serve it, without secrets: no API key (only their
digests are stored anyway), no database user or password, no value under a
name that says it is one.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.db import connection
from rest_framework.response import Response

from ...conf import DEFAULTS, ojs_settings
from ...core import engine, maintenance_mode
from ...protocol.durations import parse_duration
from ...protocol.errors import InvalidRequest
from ...version import __version__
from ..base import OJS_VERSION
from .base import AdminView

MAX_REASON_LENGTH = 1000
HIDDEN = "(hidden)"
SECRET_NAME = re.compile(r"secret|password|passwd|token|credential|private|dsn|api_?key$", re.IGNORECASE)


class MaintenanceView(AdminView):
    """§12.1: ``GET`` the state; ``POST {"enabled": true, "reason": "...", "estimated_duration": "PT30M"}``."""

    def get(self, request: Any) -> Response:
        return Response(maintenance_mode.current(fresh=True).to_dict(flag="maintenance"))

    def post(self, request: Any) -> Response:
        body = self.body()
        unknown = sorted(set(body) - {"enabled", "reason", "estimated_duration"})
        if unknown:
            raise InvalidRequest(f"unknown fields: {', '.join(unknown)} (known: enabled, reason, estimated_duration)",
                                 field=unknown[0])
        enabled = body.get("enabled")
        if not isinstance(enabled, bool):
            raise InvalidRequest("enabled must be true or false", field="enabled")
        reason = body.get("reason") or ""
        if not isinstance(reason, str) or len(reason) > MAX_REASON_LENGTH:
            raise InvalidRequest(f"reason must be a string of at most {MAX_REASON_LENGTH} characters",
                                 field="reason")
        duration = body.get("estimated_duration")
        if duration is not None:
            try:
                duration = parse_duration(duration)
                if duration.days > 366:
                    raise ValueError("an estimate of more than a year")
            except ValueError as exc:
                raise InvalidRequest(f"estimated_duration {exc}", field="estimated_duration") from None
        state = maintenance_mode.enter(reason, duration) if enabled else maintenance_mode.leave()
        return Response(state.to_dict(flag="maintenance"))


class ConfigView(AdminView):
    """§12.2: the configuration in effect, non-sensitive values only."""

    def get(self, request: Any) -> Response:
        database = connection.settings_dict
        return Response({
            "implementation": {"name": "django-ojs", "version": __version__},
            "ojs_version": OJS_VERSION,
            "backend": {
                "vendor": connection.vendor,
                "name": str(database.get("NAME") or ""),
                "host": database.get("HOST") or None,
                "port": str(database.get("PORT") or "") or None,
            },
            "engine": "one-statement" if engine.current() is engine.POSTGRES else "stepwise",
            "settings": {name: public(name, getattr(ojs_settings, name)) for name in sorted(DEFAULTS)},
            "maintenance": maintenance_mode.current().to_dict(),
        })


def public(name: str, value: Any) -> Any:
    """``value`` as JSON, with whatever a name calls secret hidden and credentials taken out of URLs."""
    if SECRET_NAME.search(name):
        return HIDDEN
    if isinstance(value, dict):
        return {str(key): public(str(key), item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [public(name, item) for item in value]
    if isinstance(value, str):
        return _without_credentials(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return repr(value)  # a callable in a middleware list, say


def _without_credentials(text: str) -> str:
    """A URL's user and password removed (``postgres://user:pw@host/db`` -> ``postgres://host/db``)."""
    if "://" not in text or "@" not in text:
        return text
    try:
        parts = urlsplit(text)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    except ValueError:
        return HIDDEN
