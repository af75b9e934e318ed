"""Test settings: the example project on PostgreSQL.

``OJS_TEST_DATABASE_URL`` picks the database (pytest-django creates and drops
``test_<name>`` beside it); ``sqlite://`` runs the suite on SQLite, where the
tests marked ``postgres`` are skipped.
"""

import os

os.environ.setdefault("DATABASE_URL", os.environ.get("OJS_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/ojs"))

from example_project.settings import *  # noqa: E402,F401,F403
from example_project.settings import DATABASES, OJS  # noqa: E402

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("OJS_TEST_SQLITE_PATH", "/tmp/django-ojs-test.sqlite3")}
else:
    DATABASES["default"]["CONN_MAX_AGE"] = 0

OJS.update(AUTH_REQUIRED=True, TEST_HOOKS=False)
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Probe handlers and tables for the worker tests (tests/worker/probe).
INSTALLED_APPS = [*INSTALLED_APPS, "tests.worker.probe"]

# Django >= 6.0: @task functions become OJS jobs (tests/worker/test_django_tasks.py).
TASKS = {"default": {"BACKEND": "django_ojs.tasks.OJSBackend", "OPTIONS": {"RETRY": {"max_attempts": 1}}}}
