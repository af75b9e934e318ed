"""System checks: settings that are wrong, or dangerous outside a test bench."""

from __future__ import annotations

from django.core import checks

from .conf import DEFAULTS, ojs_settings


@checks.register()
def check_settings(app_configs=None, **kwargs):
    messages = []
    for key in ojs_settings.unknown_keys():
        messages.append(
            checks.Error(
                f"OJS[{key!r}] is not a django-ojs setting.",
                hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                id="django_ojs.E001",
            )
        )
    if ojs_settings.HEARTBEAT_TIMEOUT < 3 * ojs_settings.HEARTBEAT_INTERVAL:
        messages.append(
            checks.Warning(
                "OJS HEARTBEAT_TIMEOUT is less than 3 heartbeat intervals; busy workers may be declared dead.",
                hint="ojs-worker-protocol §10.3 asks for at least 3x HEARTBEAT_INTERVAL.",
                id="django_ojs.W001",
            )
        )
    if ojs_settings.TEST_HOOKS:
        messages.append(
            checks.Warning(
                "OJS TEST_HOOKS is on: the test reset endpoint and meta.test_directive are served.",
                hint="Turn it off outside conformance and test runs.",
                id="django_ojs.W002",
            )
        )
    if not ojs_settings.AUTH_REQUIRED:
        messages.append(
            checks.Warning(
                "OJS AUTH_REQUIRED is off: the API accepts requests without an API key.",
                hint="Only on a trusted network, such as the local demo.",
                id="django_ojs.W003",
            )
        )
    return messages
