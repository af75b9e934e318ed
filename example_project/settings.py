"""Settings of the example project, read from the environment with django-environ.

Without ``DATABASE_URL`` it runs on SQLite (``db.sqlite3`` beside this
package); with ``DATABASE_URL=postgres://...`` on PostgreSQL. A ``.env`` file
at the repository root is read too.
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env")

DEBUG = env.bool("DEBUG", default=False)
# The default key is for the local demo only; a deployment sets SECRET_KEY.
SECRET_KEY = env("SECRET_KEY", default="django-ojs-example-insecure-key-change-me")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_ojs",
    "example_project.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        # Writers queue for the lock at BEGIN instead of failing mid-transaction:
        # with one writer at a time, claims stay exclusive (DESIGN invariant 10).
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        # WAL lets readers (INFO, the admin) proceed while a writer works.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    # Workers and the reaper keep their connections (no connect per loop).
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
    # Off by default: a health check is a query at the start of every request
    # (measured: a fifth of a health request). Without it, the first request
    # on a connection PostgreSQL dropped answers 503 (retryable) and the next
    # one reconnects (docs/how-to/deployment.md).
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("CONN_HEALTH_CHECKS", default=False)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# In production the proxy in front serves STATIC_ROOT (manage.py collectstatic;
# docs/how-to/serving.md). The demo has no proxy: it asks Django to serve them.
SERVE_STATIC = env.bool("SERVE_STATIC", default=False)

OJS = {
    "AUTH_REQUIRED": env.bool("OJS_AUTH_REQUIRED", default=True),
    "TEST_HOOKS": env.bool("OJS_TEST_HOOKS", default=False),
    "RESPONSE_MEDIA_TYPE": env("OJS_RESPONSE_MEDIA_TYPE", default="application/openjobspec+json"),
    "REAPER_INTERVAL": env.float("OJS_REAPER_INTERVAL", default=0.25),
    "EVENTS": env.bool("OJS_EVENTS", default=True),
    "METRICS": env.bool("OJS_METRICS", default=False),
    "TRACING": env.bool("OJS_TRACING", default=False),
    "PROGRESS_STREAMS": env.int("OJS_PROGRESS_STREAMS", default=2),
    "PROGRESS_STREAM_SECONDS": env.float("OJS_PROGRESS_STREAM_SECONDS", default=300.0),
    "RESULT_WAITS": env.int("OJS_RESULT_WAITS", default=1),
    "RESULT_WAIT_MAX_SECONDS": env.float("OJS_RESULT_WAIT_MAX_SECONDS", default=50.0),
    "API_KEY_CACHE_SECONDS": env.float("OJS_API_KEY_CACHE_SECONDS", default=5.0),
    "CORS_ALLOWED_ORIGINS": env.list("OJS_CORS_ALLOWED_ORIGINS", default=[]),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "django_ojs": {"handlers": ["console"], "level": env("OJS_LOG_LEVEL", default="INFO")},
        # The demo handlers' own lines (example_project/demo/jobs.py).
        "example_project": {"handlers": ["console"], "level": env("OJS_LOG_LEVEL", default="INFO")},
    },
}
