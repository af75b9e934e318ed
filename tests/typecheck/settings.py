"""The smallest settings mypy's Django plugin needs to load django_ojs (tox -e typecheck).

Independent of the example project, so the typecheck environment installs only
the app and the type-checking tools; no database is opened.
"""

SECRET_KEY = "typecheck-only"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "rest_framework",
    "django_ojs",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
USE_TZ = True
