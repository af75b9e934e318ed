"""Fixtures shared by every test package.

The database is real: PostgreSQL by default (``OJS_TEST_DATABASE_URL``), or
SQLite with ``OJS_TEST_DATABASE_URL=sqlite://``. Tests marked ``postgres``
are skipped on SQLite.
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, settings
from rest_framework.test import APIClient

from django_ojs.conf import ojs_settings
from django_ojs.protocol.envelope import parse_job
from tests.waiting import WaitTimeout, wait_until

# django_ojs.testing's fixtures (ojs_jobs, ojs_inline), as a project would load them (docs/how-to/testing.md).
pytest_plugins = ["django_ojs.testing.fixtures"]

MEDIA_TYPE = "application/openjobspec+json"

# Property tests (Hypothesis): "ci", the default, keeps the whole suite's share
# to a minute or two; HYPOTHESIS_PROFILE=long searches 20 times as many examples
# (the state machine alone then takes well over ten minutes).
settings.register_profile(
    "ci", max_examples=50, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "long", max_examples=1000, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# How long the last test's processes may keep a session on the test database after they
# exit (a backend ends a moment after its client does) before the database is dropped.
LAST_SESSIONS_PATIENCE = 20


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database; before it drops the database, wait for the sessions of
    processes the tests started to end. A session still there after that is named in a
    warning (pytest-django then warns that the database is in use and leaves it behind)."""
    yield
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock():
        try:
            wait_until(lambda: not other_sessions(), LAST_SESSIONS_PATIENCE, "the other sessions to end", 0.1)
        except WaitTimeout:
            warnings.warn(
                f"sessions still on the test database after {LAST_SESSIONS_PATIENCE} s: {other_sessions()}",
                stacklevel=1,
            )
        finally:
            connection.close()


def other_sessions() -> list[tuple]:
    """The sessions on this database other than this one: pid, application, state, statement."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, application_name, state, left(query, 80) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchall()


def pytest_collection_modifyitems(config, items):
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def ojs(settings):
    """Override OJS settings for one test: ``ojs(EVENTS=False)``."""

    def apply(**overrides: Any) -> None:
        settings.OJS = {**settings.OJS, **overrides}
        ojs_settings.reload()

    yield apply
    ojs_settings.reload()


@pytest.fixture
def queue_settings_cached(ojs):
    """For tests that count statements after a first push has cached the queue's settings:
    with the default one-second cache (QUEUE_CONFIG_TTL) a slow machine may read them again
    in between, and the count is off by one. Maintenance mode, read through the same cache
    by FETCH, is read once here."""
    from django_ojs.core import maintenance_mode

    ojs(QUEUE_CONFIG_TTL=3600)
    maintenance_mode.current()


ERROR_KEYS = {"code", "message", "retryable", "details", "request_id", "hint", "docs_url"}


def check_binding_response(response) -> None:
    """What every OJS response must carry (binding §6.5, §16; AUDIT §2.3).

    Headers on every response; the error body on every error; never a 500 (a 503 is the
    binding's backend_unavailable: the database away or, on SQLite, held by other writers).
    """
    assert response.status_code < 500 or response.status_code == 503, getattr(response, "content", b"")[:500]
    assert response["OJS-Version"] == "1.0"
    assert response["X-Request-Id"]
    if getattr(response, "streaming", False):
        return  # a progress stream: text/event-stream, read by its test
    if response.content:
        assert response["Content-Type"] == ojs_settings.RESPONSE_MEDIA_TYPE
    if response.status_code >= 400:
        error = response.json()["error"]
        assert ERROR_KEYS <= set(error), error
        assert error["request_id"] == response["X-Request-Id"]
        assert isinstance(error["retryable"], bool)


class OJSClient:
    """A DRF test client speaking the binding's media type, with an API key.

    Every response is checked with ``check_binding_response``.
    """

    def __init__(self, key: str | None):
        self.client = APIClient()
        if key:
            self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")

    def _send(self, method: str, path: str, body: Any = None, **extra: Any):
        kwargs: dict[str, Any] = {}
        if body is not None:
            import json

            kwargs = {"data": json.dumps(body), "content_type": MEDIA_TYPE}
        response = getattr(self.client, method)(path, **kwargs, **extra)
        check_binding_response(response)
        return response

    def get(self, path: str, **extra: Any):
        return self._send("get", path, **extra)

    def post(self, path: str, body: Any = None, **extra: Any):
        return self._send("post", path, body, **extra)

    def delete(self, path: str, **extra: Any):
        return self._send("delete", path, **extra)

    def put(self, path: str, body: Any = None, **extra: Any):
        return self._send("put", path, body, **extra)

    def post_raw(self, path: str, data: bytes | str, content_type: str = MEDIA_TYPE, **extra: Any):
        """POST a body exactly as given (malformed JSON, other media types)."""
        response = self.client.generic("POST", path, data, content_type=content_type, **extra)
        check_binding_response(response)
        return response


@pytest.fixture
def make_client(db):
    """``make_client("worker")`` -> a client whose key has those scopes."""
    from django_ojs.models import ApiKey

    def build(*scopes: str) -> OJSClient:
        _, secret = ApiKey.objects.issue("test", scopes or ("admin",))
        return OJSClient(secret)

    return build


@pytest.fixture
def api(make_client) -> OJSClient:
    """A client with an admin key."""
    return make_client("admin")


@pytest.fixture
def spec():
    """Build a JobSpec from a PUSH body: ``spec(type="a.b", options={...})``."""

    def build(**body: Any):
        body.setdefault("type", "test.job")
        body.setdefault("args", [])
        return parse_job(body)

    return build


@pytest.fixture
def postgres_cluster() -> Iterator[Any]:
    """A started PostgreSQL cluster of the test's own, to stop and restart (``tests/throwaway_postgres.py``).

    Removed after the test, pass or fail. Skipped where PostgreSQL's binaries
    are missing, except in CI (``CI`` set), where that fails the test.
    """
    from tests.throwaway_postgres import cluster_for_tests

    with cluster_for_tests() as cluster:
        yield cluster


@pytest.fixture
def is_postgres() -> bool:
    return connection.vendor == "postgresql"


@pytest.fixture(autouse=True)
def _forget_known_queues():
    """The core remembers which queue rows it committed, and caches their settings; each test
    starts with a fresh database (a queue made fair by one test is not fair in the next)."""
    from django_ojs.core import queue_settings

    queue_settings.known_queues.clear()
    queue_settings.forget()
    yield
    queue_settings.known_queues.clear()
    queue_settings.forget()


@pytest.fixture(autouse=True)
def _forget_maintenance_mode():
    """Maintenance mode is cached per process; each test's database starts without it."""
    from django_ojs.core import maintenance_mode

    maintenance_mode.forget()
    yield
    maintenance_mode.forget()


@pytest.fixture(autouse=True)
def _forget_verified_keys():
    """Each test issues its own keys; none is trusted from an earlier test's cache."""
    from django_ojs.keys import key_cache

    key_cache.forget()
    yield
    key_cache.forget()


@pytest.fixture
def push(db, spec):
    """Store a job through the core: ``push(type="a.b", options={...})`` -> Job."""
    from django_ojs.models import Job

    def push_job(**body: Any):
        return Job.objects.push(spec(**body))

    return push_job


@pytest.fixture
def claim(push):
    """An active job held by ``worker_id``: pushed to a queue of its own, then fetched.

    ``claim("w1", options={...})``; ``worker_id=None`` claims without an owner.
    """
    from django_ojs.models import Job

    names = itertools.count()

    def claim_job(worker_id: str | None = "worker-1", *, visibility_timeout=None, **body: Any):
        queue = f"claimed-{next(names)}"
        body["options"] = {**body.get("options", {}), "queue": queue}
        pushed = push(**body)
        claimed = Job.objects.fetch([queue], worker_id=worker_id, visibility_timeout=visibility_timeout)
        assert [job.id for job in claimed] == [pushed.id]
        return claimed[0]

    return claim_job
