"""The admin API's dead letter (ojs-admin-api §11) on the wire: the example project under gunicorn, with an
admin key, a read key and keys that lack the scope.

It serves the jobs ``/ojs/v1/dead-letter`` serves -- discarded jobs kept as dead letters, never a plain
discard -- with the same counts (core/dead_letter.py, core/stats.dead_letter_stats).
"""

from __future__ import annotations

from typing import Any

import pytest

from django_ojs.core import maintenance_mode
from django_ojs.models import Job, JobError
from django_ojs.protocol.failure import Failure
from tests.api.test_admin_wire import call, issue
from tests.api.test_fuzz import snapshot
from tests.helpers import reload

pytestmark = pytest.mark.postgres

ADMIN = "/ojs/v1/admin"


def failed(spec: Any, queue: str, *, on_exhaustion: str, type: str = "mail.send") -> Job:
    """A job of ``queue`` that failed its one attempt, kept as its policy says."""
    job = Job.objects.push(spec(type=type, priority=100, options={
        "queue": queue, "retry": {"max_attempts": 1, "on_exhaustion": on_exhaustion}}))
    Job.objects.fetch([queue], worker_id="w-fail")
    return Job.objects.fail(job.id, Failure(type="SMTPError", message="refused"))


@pytest.fixture
def store(spec):
    """Two dead letters (queues mail and sms) and a plain discard (mail)."""
    return {
        "mail": failed(spec, "mail", on_exhaustion="dead_letter"),
        "sms": failed(spec, "sms", on_exhaustion="dead_letter", type="sms.send"),
        "plain": failed(spec, "mail", on_exhaustion="discard"),
    }


def ids(body: dict[str, Any]) -> set[str]:
    return {item["id"] for item in body["items"]}


def test_the_admin_dead_letter_lists_and_counts_what_the_dead_letter_does(wire, store):
    dead = {str(store["mail"].id), str(store["sms"].id)}
    status, _, listed = call(wire, "GET", f"{ADMIN}/dead-letter")
    assert status == 200 and ids(listed) == dead and listed["pagination"]["total"] == 2
    assert all(item["dead_letter"] is True and item["kept_until"] for item in listed["items"])
    _, _, public = call(wire, "GET", "/ojs/v1/dead-letter")
    assert {job["id"] for job in public["jobs"]} == dead
    _, _, stats = call(wire, "GET", f"{ADMIN}/dead-letter/stats")
    _, _, public_stats = call(wire, "GET", "/ojs/v1/dead-letter/stats")
    assert stats == public_stats and stats["total"] == 2 and stats["by_queue"] == {"mail": 1, "sms": 1}
    _, _, narrowed = call(wire, "GET", f"{ADMIN}/dead-letter?queue=mail")
    assert ids(narrowed) == {str(store["mail"].id)}
    assert call(wire, "GET", f"{ADMIN}/dead-letter/stats?type=sms.send")[2]["total"] == 1
    status, _, one = call(wire, "GET", f"{ADMIN}/dead-letter/{store['sms'].id}")
    assert status == 200 and one["job"]["dead_letter"] is True and len(one["job"]["errors"]) == 1


@pytest.mark.parametrize("door", [ADMIN, "/ojs/v1"])
def test_a_job_that_is_no_discard_is_not_found_by_any_dead_letter_door(wire, spec, door):
    """A completed job is not in the dead letter: reading, retrying or deleting it there are all 404 (retry
    said 409, as if it were there and could not move)."""
    done = Job.objects.push(spec(options={"queue": "mail"}))
    Job.objects.fetch(["mail"], worker_id="w1")
    Job.objects.ack(done.id)
    before = snapshot()
    for method, path in (("GET", f"/dead-letter/{done.id}"), ("POST", f"/dead-letter/{done.id}/retry"),
                         ("DELETE", f"/dead-letter/{done.id}")):
        if door != ADMIN and method == "GET":
            continue  # the binding reads one dead letter only through the list
        status, _, body = call(wire, method, door + path, {} if method == "POST" else None)
        assert (status, body["error"]["code"], body["error"]["details"]["resource_type"]) == (
            404, "not_found", "dead_letter_job"), (door, path, body)
    assert snapshot() == before


def test_a_plain_discard_is_not_in_the_admin_dead_letter_and_no_move_there_touches_it(wire, store):
    plain = store["plain"]
    before = snapshot()
    for method, path in (("GET", f"/dead-letter/{plain.id}"), ("POST", f"/dead-letter/{plain.id}/retry"),
                         ("DELETE", f"/dead-letter/{plain.id}")):
        status, _, body = call(wire, method, ADMIN + path, {} if method == "POST" else None)
        assert (status, body["error"]["code"]) == (404, "not_found"), path
    # By filter: the plain discard matches queue=mail but is no dead letter.
    status, _, report = call(wire, "POST", f"{ADMIN}/dead-letter/retry", {"filter": {"queue": "mail", "type": "x"},
                                                                           "confirm": True})
    assert status == 200 and report["retried"] == 0
    assert snapshot() == before


def test_retry_and_delete_one_dead_letter(wire, store):
    status, _, body = call(wire, "POST", f"{ADMIN}/dead-letter/{store['mail'].id}/retry", {})
    assert status == 200 and (body["job"]["state"], body["job"]["attempt"]) == ("available", 0)
    assert JobError.objects.filter(job=store["mail"]).count() == 1  # the history is kept (ojs-dead-letter §6.1)
    status, _, body = call(wire, "DELETE", f"{ADMIN}/dead-letter/{store['sms'].id}")
    assert (status, body["deleted"]) == (200, True)
    assert not Job.objects.filter(pk=store["sms"].pk).exists()
    assert call(wire, "GET", f"{ADMIN}/dead-letter")[2]["items"] == []


def test_retry_by_filter_moves_the_matching_dead_letters_only_with_confirm(wire, store):
    before = snapshot()
    status, _, body = call(wire, "POST", f"{ADMIN}/dead-letter/retry", {"filter": {"queue": "mail"}})
    assert (status, body["error"]["code"], body["error"]["details"]["field"]) == (400, "invalid_request", "confirm")
    assert snapshot() == before
    status, _, report = call(wire, "POST", f"{ADMIN}/dead-letter/retry", {"filter": {"queue": "mail"},
                                                                           "confirm": True})
    assert status == 200 and (report["retried"], report["matched"], report["complete"]) == (1, 1, True)
    assert reload(store["mail"]).state == "available"
    assert (reload(store["sms"]).state, reload(store["plain"]).state) == ("discarded", "discarded")


def test_purge_by_filter_deletes_dead_letters_older_than_a_time_and_no_plain_discard(wire, store):
    status, _, report = call(wire, "DELETE", f"{ADMIN}/dead-letter",
                             {"older_than": "2000-01-01T00:00:00Z", "confirm": True})
    assert status == 200 and report["purged_count"] == 0
    status, _, report = call(wire, "DELETE", f"{ADMIN}/dead-letter",
                             {"older_than": "2999-01-01T00:00:00Z", "confirm": True})
    assert status == 200 and (report["purged_count"], report["action"]) == (2, "purge")
    assert list(Job.objects.values_list("pk", flat=True)) == [store["plain"].pk]


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("GET", "/dead-letter?state=active", None, "state"),
    ("GET", "/dead-letter?queue=Bad%20Queue", None, "queue"),
    ("GET", "/dead-letter?per_page=1000", None, "per_page"),
    ("GET", "/dead-letter/stats?since=yesterday", None, "since"),
    ("GET", "/dead-letter/not-an-id", None, "id"),
    ("POST", "/dead-letter/not-an-id/retry", {}, "id"),
    ("DELETE", "/dead-letter", {"older_than": "last week", "confirm": True}, "older_than"),
    ("DELETE", "/dead-letter", {"filter": {"colour": "red"}, "confirm": True}, "filter.colour"),
    ("DELETE", "/dead-letter", {"filter": "mail", "confirm": True}, "filter"),
    ("DELETE", "/dead-letter", {"older_than": "2999-01-01T00:00:00Z"}, "confirm"),
    ("POST", "/dead-letter/retry", {"filter": {"state": ["active"]}, "confirm": True}, "state"),
])
def test_bad_input_is_a_400_that_names_the_field_and_changes_nothing(wire, store, method, path, body, field):
    before = snapshot()
    status, _, answer = call(wire, method, ADMIN + path, body)
    assert (status, answer["error"]["code"]) == (400, "invalid_request"), answer
    assert answer["error"]["details"].get("field") == field, answer
    assert snapshot() == before


def test_reads_need_read_or_admin_and_moves_need_admin(wire, store):
    dead = store["mail"]
    worker_key, read_key = issue("worker"), issue("read")
    before = snapshot()
    for path in ("/dead-letter", "/dead-letter/stats", f"/dead-letter/{dead.id}"):
        status, _, body = call(wire, "GET", ADMIN + path, key=worker_key)
        assert (status, body["error"]["details"]["required_scope"]) == (403, "read or admin"), path
        assert call(wire, "GET", ADMIN + path, key=read_key)[0] == 200, path
    for method, path, body in (("POST", f"/dead-letter/{dead.id}/retry", {}), ("DELETE", f"/dead-letter/{dead.id}", None),
                               ("POST", "/dead-letter/retry", {"confirm": True}),
                               ("DELETE", "/dead-letter", {"confirm": True})):
        for key in (read_key, worker_key):
            status, _, answer = call(wire, method, ADMIN + path, body, key=key)
            assert (status, answer["error"]["details"]["required_scope"]) == (403, "admin"), (method, path)
    assert snapshot() == before and not maintenance_mode.current(fresh=True).enabled
