"""Server timestamps through gunicorn, as a typed client's date parser reads them.

The binding writes them ``2026-02-12T10:30:00.000Z`` (§6.3), and clients in typed
languages parse them with that one pattern (Swift's ``ISO8601DateFormatter`` with
fractional seconds, a ``yyyy-MM-dd'T'HH:mm:ss.SSSX`` formatter): a time on a whole
second must keep its ``.000``, or the parser that read every job's ``created_at``
fails on a cron's ``next_run_at``, which is always on a whole minute.
"""

from __future__ import annotations

import json
import re

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

WIRE_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_server_timestamps_on_a_whole_second_keep_their_milliseconds(wire):
    status, _, body = wire.send("POST", "/ojs/v1/cron", {"name": "nightly", "cron": "0 3 * * *",
                                                          "type": "report.build", "args": []})
    assert status == 201, body
    next_run = json.loads(body)["cron_job"]["next_run_at"]
    status, _, body = wire.send("POST", "/ojs/v1/jobs", {"type": "a.job", "args": [],
                                                         "options": {"delay_until": "2099-01-01T00:00:00Z"}})
    assert status == 201, body
    job = json.loads(body)["job"]
    # run_at is the server's; scheduled_at is the client's own text, echoed as written.
    assert job["run_at"] == "2099-01-01T00:00:00.000Z"
    assert WIRE_TIME.fullmatch(next_run), next_run
    assert job["scheduled_at"] == "2099-01-01T00:00:00Z"
