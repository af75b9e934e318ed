"""The ``wire`` fixture: the example project served by gunicorn on a free port, with an admin key."""

from __future__ import annotations

import pytest

from django_ojs.models import ApiKey
from tests.api.gunicorn import serving


@pytest.fixture
def wire(transactional_db):
    _, key = ApiKey.objects.issue("wire", ["admin"])
    with serving(key) as client:
        yield client
