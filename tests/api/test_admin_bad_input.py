"""Bad input to the admin API, path by path: a clear 4xx in the binding's error format, never a 500, nothing changed.

One table: each row a request an operator's script or a confused UI could
send (a malformed id, filter, body, page size, cursor or time) and the
status and ``details.field`` it must get. Every reply also passes
``check_binding_response`` (the headers, the error body, no 500). Random
garbage in the same places is ``test_fuzz.py``'s.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from django_ojs.models import Job, Worker
from django_ojs.protocol.failure import Failure
from tests.api.test_fuzz import snapshot
from tests.conftest import MEDIA_TYPE, check_binding_response

ADMIN = "/ojs/v1/admin"
UNKNOWN = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
FORGED_CURSOR = "eyJzIjogImNyZWF0ZWRfYXQiLCAiZCI6IDEsICJ2IjogbnVsbCwgInEiOiAiNCJ9"  # seq a string
OTHER_SORT_CURSOR = "eyJzIjogInByaW9yaXR5IiwgImQiOiAxLCAidiI6IDAsICJxIjogNH0"  # issued for sort=priority

# (what is wrong, method, path, body (a str is sent as it is), status, details.field or None)
CASES: list[tuple[str, str, str, Any, int, str | None]] = [
    # ids and names in the path
    ("a job id that is no UUID", "GET", "/jobs/not-a-uuid", None, 400, "id"),
    ("a job id that is no UUID (cancel)", "POST", "/jobs/12345/cancel", {}, 400, "id"),
    ("a job id that is no UUID (retry)", "POST", "/jobs/x/retry", {}, 400, "id"),
    ("an unknown job", "GET", f"/jobs/{UNKNOWN}", None, 404, None),
    ("an unknown job (cancel)", "POST", f"/jobs/{UNKNOWN}/cancel", {}, 404, None),
    ("an unknown job (retry)", "POST", f"/jobs/{UNKNOWN}/retry", {}, 404, None),
    ("a queue name with capitals", "GET", "/queues/Bad_Name", None, 400, "name"),
    ("a queue name with capitals (pause)", "POST", "/queues/Bad_Name/pause", {}, 400, "name"),
    ("a queue name with capitals (resume)", "POST", "/queues/Bad_Name/resume", {}, 400, "name"),
    ("a queue name with capitals (config)", "PUT", "/queues/Bad_Name/config", {"concurrency": 1}, 400, "name"),
    ("a queue name with capitals (purge)", "DELETE", "/queues/Bad_Name/jobs",
     {"states": ["completed"], "confirm": True}, 400, "name"),
    ("a queue name too long", "GET", "/queues/" + "q" * 300, None, 400, "name"),
    ("an unknown queue", "GET", "/queues/never-used", None, 404, None),
    ("a worker id with a NUL", "GET", "/workers/w%00", None, 400, "id"),
    ("a worker id with a NUL (quiet)", "POST", "/workers/w%00/quiet", {}, 400, "id"),
    ("a worker id with a NUL (deregister)", "DELETE", "/workers/w%00", None, 400, "id"),
    ("an unknown worker", "GET", "/workers/nobody", None, 404, None),
    ("an unknown worker (quiet)", "POST", "/workers/nobody/quiet", {}, 404, None),
    ("an unknown worker (deregister)", "DELETE", "/workers/nobody", None, 404, None),
    ("an unknown bulk action", "POST", "/jobs/bulk/purge", {"confirm": True}, 404, None),
    # the job list's filters
    ("an unknown state", "GET", "/jobs?state=nonsense", None, 400, "state"),
    ("an empty state among others", "GET", "/jobs?state=available,,discarded", None, 400, "state"),
    ("a malformed queue", "GET", "/jobs?queue=Bad_Name", None, 400, "queue"),
    ("a type too long", "GET", "/jobs?type=" + "t" * 300, None, 400, "type"),
    ("a search too long", "GET", "/jobs?search=" + "s" * 1001, None, 400, "search"),
    ("a search with broken JSON", "GET", "/jobs?search=" + quote("args:{broken"), None, 400, "search"),
    ("a search of a fragment no job can hold", "GET", "/jobs?search=" + quote("args:[NaN]"), None, 400, "search"),
    ("a dead letter search of an unstorable escape", "GET", "/dead-letter?search=" + quote('args:["\\u0000"]'),
     None, 400, "search"),
    ("a time that is no time", "GET", "/jobs?since=yesterday", None, 400, "since"),
    ("a date without a time", "GET", "/jobs?until=2026-01-01", None, 400, "until"),
    ("a day that does not exist", "GET", "/jobs?since=2026-02-30T00:00:00Z", None, 400, "since"),
    ("a relative time", "GET", "/jobs?since=-PT1H", None, 400, "since"),
    # pages, sorts and cursors
    ("per_page 0", "GET", "/jobs?per_page=0", None, 400, "per_page"),
    ("per_page past 100", "GET", "/jobs?per_page=101", None, 400, "per_page"),
    ("per_page not a number", "GET", "/jobs?per_page=ten", None, 400, "per_page"),
    ("per_page not a number (queues)", "GET", "/queues?per_page=1.5", None, 400, "per_page"),
    ("per_page past 100 (workers)", "GET", "/workers?per_page=1000", None, 400, "per_page"),
    ("limit past 100", "GET", "/jobs?limit=500", None, 400, "limit"),  # named as sent
    ("limit past 100 (queues)", "GET", "/queues?limit=200", None, 400, "limit"),
    ("page 0", "GET", "/jobs?page=0", None, 400, "page"),
    ("a negative page", "GET", "/queues?page=-1", None, 400, "page"),
    ("a page past the 10,000th row", "GET", "/jobs?page=1000", None, 400, "page"),
    ("a negative offset", "GET", "/workers?offset=-5", None, 400, "offset"),
    ("an unknown sort", "GET", "/jobs?sort=args", None, 400, "sort"),
    ("an unknown order", "GET", "/jobs?order=up", None, 400, "order"),
    ("a cursor that is no base64 JSON", "GET", "/jobs?cursor=forged", None, 400, "cursor"),
    ("a cursor with a forged position", "GET", f"/jobs?cursor={FORGED_CURSOR}", None, 400, "cursor"),
    ("a cursor of another sort", "GET", f"/jobs?cursor={OTHER_SORT_CURSOR}", None, 400, "cursor"),
    ("a cursor too long", "GET", "/jobs?cursor=" + "A" * 500, None, 400, "cursor"),
    ("a cursor beside a page", "GET", f"/jobs?page=2&cursor={OTHER_SORT_CURSOR}&sort=priority", None, 400,
     "cursor"),
    # the history
    ("an unknown period", "GET", "/stats/history?period=2m", None, 400, "period"),
    ("too many slots", "GET", "/stats/history?period=1m&since=2020-01-01T00:00:00Z", None, 400, None),
    ("a history time that is no time", "GET", "/stats/history?since=x", None, 400, "since"),
    ("a history range backwards", "GET",
     "/stats/history?since=2030-01-01T00:00:00Z&until=2029-01-01T00:00:00Z", None, 400, None),
    ("a history ending in the first hour of year 1", "GET", "/stats/history?until=0001-01-01T00:05:00Z", None,
     400, "until"),
    ("a history ending with year 9999", "GET", "/stats/history?until=9999-12-31T23:59:59Z", None, 400, "until"),
    ("a history from before the epoch", "GET", "/stats/history?since=0001-01-01T00:00:00Z&period=1d", None, 400,
     "since"),
    ("a malformed history queue", "GET", "/stats/history?queue=Bad_Name", None, 400, "queue"),
    # bodies
    ("a config body that is no JSON", "PUT", "/queues/mail/config", "{concurrency: 2", 400, None),
    ("a config body that is a list", "PUT", "/queues/mail/config", "[]", 400, None),
    ("a negative concurrency", "PUT", "/queues/mail/config", {"concurrency": -1}, 400, "concurrency"),
    ("a retention of its own", "PUT", "/queues/mail/config", {"retention": {"completed": "P14D"}}, 400,
     "retention"),
    ("an unknown config field", "PUT", "/queues/mail/config", {"colour": "red"}, 400, None),
    ("a fairness key with a final newline", "PUT", "/queues/mail/config", {"fairness_key": "meta.tenant\n"}, 400,
     "fairness_key"),
    ("a weight's name with a NUL", "PUT", "/queues/mail/config",
     {"fairness_key": "meta.tenant", "fairness_weights": {"a\u0000b": 2}}, 400, None),
    ("a purge body that is no JSON", "DELETE", "/queues/mail/jobs", "states=completed", 400, None),
    ("a purge without confirm", "DELETE", "/queues/mail/jobs", {"states": ["discarded"]}, 400, "confirm"),
    ("a purge with confirm as a string", "DELETE", "/queues/mail/jobs",
     {"states": ["discarded"], "confirm": "true"}, 400, "confirm"),
    ("a purge of waiting jobs", "DELETE", "/queues/mail/jobs", {"states": ["available"], "confirm": True}, 400,
     "states"),
    ("a purge of states as a string", "DELETE", "/queues/mail/jobs", {"states": "discarded", "confirm": True}, 400,
     "states"),
    ("a purge older than no time", "DELETE", "/queues/mail/jobs",
     {"states": ["discarded"], "older_than": "last week", "confirm": True}, 400, "older_than"),
    ("a purge older than a month that does not exist", "DELETE", "/queues/mail/jobs",
     {"states": ["discarded"], "older_than": "2026-13-01T00:00:00Z", "confirm": True}, 400, "older_than"),
    ("a bulk body that is no JSON", "POST", "/jobs/bulk/retry", "{confirm: true}", 400, None),
    ("a bulk move without confirm", "POST", "/jobs/bulk/cancel", {"filter": {"queue": "mail"}}, 400, "confirm"),
    ("a bulk filter that is a list", "POST", "/jobs/bulk/delete", {"filter": [], "confirm": True}, 400, "filter"),
    ("an unknown bulk filter field", "POST", "/jobs/bulk/retry", {"filter": {"colour": "red"}, "confirm": True},
     400, "filter.colour"),
    ("a bulk state of the wrong type", "POST", "/jobs/bulk/retry", {"filter": {"state": 7}, "confirm": True}, 400,
     "state"),
    ("a bulk time that is no time", "POST", "/jobs/bulk/cancel", {"filter": {"until": "soon"}, "confirm": True},
     400, "until"),
    # a name the server does not read: left out, a filter or bound would be dropped and the move
    # or list widened to every job
    ("a misspelt bulk filter key", "POST", "/jobs/bulk/retry", {"filters": {"queue": "nothing-here"}, "confirm": True},
     400, "filters"),
    ("a bulk filter and its fields beside it", "POST", "/jobs/bulk/delete",
     {"filter": {"queue": "nothing-here"}, "queue": "mail", "confirm": True}, 400, "queue"),
    ("a misspelt dead letter purge bound", "DELETE", "/dead-letter",
     {"olderThan": "2000-01-01T00:00:00Z", "confirm": True}, 400, "olderThan"),
    ("a misspelt dead letter retry filter", "POST", "/dead-letter/retry", {"filters": {"queue": "x"}, "confirm": True},
     400, "filters"),
    ("a misspelt purge bound", "DELETE", "/queues/mail/jobs",
     {"states": ["discarded"], "olderThan": "2000-01-01T00:00:00Z", "confirm": True}, 400, "olderThan"),
    ("a misspelt job list filter", "GET", "/jobs?status=available", None, 400, "status"),
    ("an unknown dead letter list parameter", "GET", "/dead-letter?queues=mail", None, 400, "queues"),
    ("a page size where the dead letter stats read none", "GET", "/dead-letter/stats?per_page=5", None, 400,
     "per_page"),
    ("a filter on the queue list", "GET", "/queues?state=available", None, 400, "state"),
    ("a filter on the worker list", "GET", "/workers?queue=mail", None, 400, "queue"),
    ("a misspelt history period", "GET", "/stats/history?perod=1h", None, 400, "perod"),
    ("a parameter where a job's page reads none", "GET", f"/jobs/{UNKNOWN}?expand=events", None, 400, "expand"),
    ("per_page and limit both", "GET", "/jobs?per_page=20&limit=5", None, 400, "limit"),
    ("page and offset both", "GET", "/queues?page=2&offset=5", None, 400, "offset"),
    ("a maintenance body without enabled", "POST", "/system/maintenance", {}, 400, "enabled"),
    ("a maintenance flag as a string", "POST", "/system/maintenance", {"enabled": "yes"}, 400, "enabled"),
    ("a maintenance estimate that is no duration", "POST", "/system/maintenance",
     {"enabled": True, "estimated_duration": "soon"}, 400, "estimated_duration"),
    ("an unknown maintenance field", "POST", "/system/maintenance", {"enabled": True, "until": "x"}, 400, "until"),
]

# A body that is no JSON object is the binding's invalid_payload; every other refusal here invalid_request.
CODES = {400: {"invalid_request", "invalid_payload"}, 404: {"not_found"}}


@pytest.fixture
def store(api, push):
    """A queue with a waiting and a discarded job, and a live worker: what a refused request could change."""
    push(options={"queue": "mail"})
    failed = push(options={"queue": "mail", "retry": {"max_attempts": 1}}, priority=100)
    Job.objects.fetch(["mail"], worker_id="w1")
    Job.objects.fail(failed.id, Failure(type="SMTPError", message="refused"))
    Worker.objects.register("w1")


@pytest.mark.parametrize(("what", "method", "path", "body", "status", "field"), CASES,
                         ids=[case[0] for case in CASES])
def test_bad_input_is_a_clear_4xx_in_the_error_format_and_changes_nothing(api, store, what, method, path, body,
                                                                         status, field):
    before = snapshot()
    data = body if isinstance(body, str) else json.dumps(body) if body is not None else ""
    response = api.client.generic(method, ADMIN + path, data, content_type=MEDIA_TYPE)
    check_binding_response(response)  # the headers and the error body; never a 500
    error = response.json()["error"]
    assert response.status_code == status, (what, error)
    assert error["code"] in CODES[status], (what, error)
    assert error["message"] and error["retryable"] is False, (what, error)
    if field is not None:
        assert error["details"].get("field") == field, (what, error)
    assert snapshot() == before, f"{what}: refused, but the store changed"
