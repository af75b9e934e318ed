"""A rate-limited FETCH through gunicorn, as a client in a typed language reads its headers.

``Retry-After`` is HTTP's own header (RFC 9110 §10.2.3): an HTTP date or a whole
number of seconds. Java's and Go's integer parsers, .NET's ``RetryConditionHeaderValue``
and OkHttp all refuse a fraction ("0.873"): the header is dropped, or read as
"never". So the wait is rounded up to whole seconds, which a client that waits it
out never undercuts.
"""

from __future__ import annotations

import json
import re

import pytest

from django_ojs.models import ApiKey
from tests.api.gunicorn import serving

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

DELAY_SECONDS = re.compile(r"[0-9]+")


def test_a_held_fetch_says_when_to_come_back_in_whole_seconds(transactional_db):
    _, key = ApiKey.objects.issue("rate-limited", ["admin"])
    job = {"type": "r.job", "args": [], "options": {"queue": "r", "rate_limit": {"max_per_second": 1}}}
    with serving(key) as wire:
        for _ in range(2):
            assert wire.send("POST", "/ojs/v1/jobs", job)[0] == 201
        status, _, body = wire.send("POST", "/ojs/v1/workers/fetch", {"queues": ["r"]})
        assert status == 200 and len(json.loads(body)["jobs"]) == 1
        status, headers, body = wire.send("POST", "/ojs/v1/workers/fetch", {"queues": ["r"]})
    assert status == 200 and json.loads(body)["jobs"] == []
    assert DELAY_SECONDS.fullmatch(headers["Retry-After"]), headers["Retry-After"]
    # The second job starts a second after the first: never sooner than the header says.
    assert int(headers["Retry-After"]) == 1
    assert DELAY_SECONDS.fullmatch(headers["X-RateLimit-Reset"])
