from __future__ import annotations

import logging

from django.apps import AppConfig
from django.db.backends.signals import connection_created

from .conf import ojs_settings
from .core import sqlite_errors

logger = logging.getLogger("django_ojs")


class DjangoOJSConfig(AppConfig):
    name = "django_ojs"
    verbose_name = "Open Job Spec"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import django
        from django.utils.module_loading import autodiscover_modules

        # Imported once the app registry is ready: the checks read the models and handlers.
        from .conf import checks  # noqa: F401  (registers the system checks)

        # On SQLite a failed query lets go of its cursor in its own thread (core/sqlite_errors.py).
        connection_created.connect(sqlite_errors.install, dispatch_uid="django_ojs.sqlite_errors")

        # Every installed app's jobs.py registers its handlers, in the web
        # processes (for their enqueue defaults) as in the workers.
        autodiscover_modules("jobs")
        if django.VERSION >= (6, 0):
            # Registers the handler of Django's @task functions (django.tasks exists from 6.0).
            from . import tasks  # noqa: F401

        if ojs_settings.METRICS:
            from .observe import metrics  # the "prometheus" extra, only with metrics on

            metrics.enable()

        # Announced at every start, not only by `manage.py check`.
        if ojs_settings.TEST_HOOKS:
            logger.warning(
                "OJS TEST_HOOKS is on: /ojs/v1/_test/reset and meta.test_directive are served. "
                "Never enable this in production."
            )
        if not ojs_settings.AUTH_REQUIRED:
            logger.warning(
                "OJS AUTH_REQUIRED is off: the /ojs/v1 API accepts requests without an API key. "
                "Only do this on a trusted network such as localhost."
            )
