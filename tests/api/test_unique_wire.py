"""Unique jobs over real HTTP: concurrent pushes of one key through gunicorn (ojs-unique-jobs §8.1)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from django_ojs.models import ApiKey, Job
from tests.api.gunicorn import serving

PUSHES = 16


@pytest.fixture
def busy_wire(transactional_db):
    """gunicorn with 4 processes of 4 threads: 16 requests really run at once."""
    _, key = ApiKey.objects.issue("wire", ["admin"])
    with serving(key, workers=4, threads=4) as client:
        yield client


@pytest.mark.parametrize("on_conflict", ["reject", "ignore", "replace"])
def test_sixteen_concurrent_pushes_of_one_unique_job_leave_exactly_one(busy_wire, on_conflict):
    body = {"type": "invoice.generate", "args": [{"order": 42}],
            "options": {"queue": "billing", "unique": {"keys": ["type", "args"], "on_conflict": on_conflict}}}
    with ThreadPoolExecutor(PUSHES) as pool:
        replies = list(pool.map(lambda _: busy_wire.send("POST", "/ojs/v1/jobs", body), range(PUSHES)))
    statuses = sorted(status for status, _, _ in replies)
    live = Job.objects.exclude(state__in=["cancelled", "completed", "discarded"])
    assert live.count() == 1
    survivor = str(live.get().id)
    if on_conflict == "reject":
        assert statuses == [201] + [409] * (PUSHES - 1)
        assert {json.loads(b)["error"]["details"]["existing_job_id"] for s, _, b in replies if s == 409} == {survivor}
    elif on_conflict == "ignore":
        assert statuses == [200] * (PUSHES - 1) + [201]
        assert {json.loads(b)["job"]["id"] for _, _, b in replies} == {survivor}
        assert Job.objects.count() == 1
    else:
        assert statuses == [201] * PUSHES, [json.loads(b) for s, _, b in replies if s != 201]
        assert Job.objects.filter(state="cancelled").count() == PUSHES - 1
