"""Test settings: the example project on PostgreSQL.

``OJS_TEST_DATABASE_URL`` picks the database (pytest-django creates and drops
``test_<name>_<checkout>[_<run>]`` beside it); ``sqlite://`` runs the suite on SQLite,
where the tests marked ``postgres`` are skipped.
"""

import hashlib
import os
import re
from pathlib import Path

os.environ.setdefault("DATABASE_URL", os.environ.get("OJS_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/ojs"))

from example_project.settings import *
from example_project.settings import DATABASES, OJS

# Two checkouts tested at once on one machine, or two of tox's environments run side by side
# (`tox run-parallel`; tox sets OJS_TEST_RUN to the environment's name), must not share a test database.
_checkout = hashlib.sha1(str(Path(__file__).resolve().parent).encode()).hexdigest()[:10]
_run = re.sub(r"[^a-z0-9]+", "_", os.environ.get("OJS_TEST_RUN", "").lower()).strip("_")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory: worker tests run real processes that must open the same database.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get(
            "OJS_TEST_SQLITE_PATH", f"/tmp/django-ojs-test-{_checkout}{'-' + _run if _run else ''}.sqlite3"
        )
    }
else:
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["TEST"] = {
        "NAME": f"test_{DATABASES['default']['NAME']}_{_checkout}{'_' + _run if _run else ''}"[:63]
    }

OJS.update(AUTH_REQUIRED=True, TEST_HOOKS=False)
# The contract suite's second PostgreSQL run (tox -e stepwise): every operation in its ORM steps.
if os.environ.get("OJS_TEST_ENGINE") == "stepwise":
    OJS["ONE_STATEMENT_PATHS"] = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Probe handlers and tables for the worker tests (tests/worker/probe).
INSTALLED_APPS = [*INSTALLED_APPS, "tests.worker.probe"]

# Django >= 6.0: @task functions become OJS jobs (tests/worker/test_django_tasks.py).
TASKS = {"default": {"BACKEND": "django_ojs.tasks.OJSBackend", "OPTIONS": {"RETRY": {"max_attempts": 1}}}}
