"""A path no endpoint serves, through gunicorn: the binding's 404, with a hint about the path.

A client in another language builds its URLs itself, and the usual slip is the
path (a trailing slash from a base URL joined with "/jobs/", a misspelt
endpoint), not an id. Its 404 says so, rather than not_found's hint for a job
that is gone (ids, retention).
"""

from __future__ import annotations

import json

import pytest

from django_ojs.api.errors import HINTS

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


UNKNOWN = [("GET", "/ojs/v1/jobs/"), ("POST", "/ojs/v1/workers/beat"), ("GET", "/ojs/v1/admin/nothing")]


def test_an_unknown_path_is_a_404_whose_hint_is_about_the_path(wire):
    for method, path in UNKNOWN:
        status, headers, body = wire.send(method, path, {} if method == "POST" else None)
        error = json.loads(body)["error"]
        assert (status, headers["Content-Type"], error["code"]) == (404, "application/openjobspec+json", "not_found")
        assert error["request_id"] == headers["X-Request-Id"]
        assert error["hint"] != HINTS["not_found"], path
        assert "path" in error["hint"] and "/ojs/v1/jobs/" in error["hint"]
