"""Every django-ojs setting and its default, in one place.

Projects override any of them in one dict::

    OJS = {"HEARTBEAT_TIMEOUT": 60, "AUTH_REQUIRED": True}

and code reads them as attributes: ``from django_ojs.conf import ojs_settings;
ojs_settings.HEARTBEAT_TIMEOUT``. Defaults come from the spec documents named
beside each; durations are in seconds unless the name says otherwise.
"""

from __future__ import annotations

from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from ..protocol.retry import RetryPolicy, parse_policy
from .defaults import DEFAULTS
from .rules import problems

__all__ = ["DEFAULTS", "OJSSettings", "ojs_settings"]


class OJSSettings:
    """Attribute access to the merged ``OJS`` setting, cached until it changes."""

    def __init__(self, defaults: dict[str, Any]):
        self._defaults = defaults
        self._cache: dict[str, Any] = {}

    def _user_settings(self) -> dict[str, Any]:
        from django.conf import settings

        return getattr(settings, "OJS", {}) or {}

    def __getattr__(self, name: str) -> Any:
        if name not in self._defaults:
            raise AttributeError(f"Unknown django-ojs setting: {name!r}")
        if name not in self._cache:
            value = self._user_settings().get(name, self._defaults[name])
            default = self._defaults[name]
            if isinstance(default, dict) and isinstance(value, dict):
                value = {**default, **value}
            self._cache[name] = value
        return self._cache[name]

    def retry_policy(self) -> RetryPolicy:
        """``DEFAULT_RETRY`` as a policy (ojs-retry §8): what a job gets whose envelope and handler
        give none. Parsed once until the setting changes, not on every PUSH and enqueue."""
        policy = self._cache.get(_RETRY_POLICY)
        if policy is None:
            policy = self._cache[_RETRY_POLICY] = parse_policy(
                self.DEFAULT_RETRY or None, field="OJS['DEFAULT_RETRY']"
            )
        return policy

    def unknown_keys(self) -> list[str]:
        return sorted(set(self._user_settings()) - set(self._defaults))

    def problems(self) -> list[tuple[str, str]]:
        """``(setting, problem)`` for each value the project set that is of the wrong type or range."""
        # All of them, defaults included (they pass: tests/unit/test_setting_rules.py),
        # so that rules between two settings see both.
        return problems({name: getattr(self, name) for name in self._defaults})

    def reload(self) -> None:
        self._cache.clear()


# Beside the settings in their cache, so it goes with them; no setting's name.
_RETRY_POLICY = "(retry policy)"
ojs_settings = OJSSettings(DEFAULTS)


@receiver(setting_changed)
def _reload_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "OJS":
        ojs_settings.reload()
