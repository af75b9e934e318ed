"""GET /ojs/v1/jobs/{id}/result, and its blocking wait (ojs-results §8.2), through real gunicorn.

A held request answers as soon as the job ends -- woken by NOTIFY, with the
fallback poll far away -- or 408 when its timeout passes, the job going on.
Held requests are capped per process (503 with Retry-After beyond) so the
other requests always find a thread.
"""

from __future__ import annotations

import json
import threading

import pytest

from django_ojs.core.types import Lease
from django_ojs.models import ApiKey, Job
from django_ojs.protocol.failure import Failure
from tests.api.gunicorn import Wire, serving
from tests.waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

# The server's fallback poll: an hour, so a held request that ends was woken by a notification.
ONLY_NOTIFY = {"OJS_LISTEN_POLL_INTERVAL": "3600"}


@pytest.fixture
def key(transactional_db) -> str:
    return ApiKey.objects.issue("result reader", ["read"])[1]


def active(push, **options) -> Job:
    pushed = push(type="result.job", options={"queue": "results", **options})
    [job] = Job.objects.fetch(["results"], worker_id="w1")
    assert job.id == pushed.id
    return job


def get(wire: Wire, job: Job, query: str = "") -> tuple[int, dict, dict]:
    status, headers, body = wire.send("GET", f"/ojs/v1/jobs/{job.id}/result{query}")
    return status, dict(headers), json.loads(body)


def held_in_background(wire: Wire, job: Job, query: str) -> tuple[threading.Thread, list]:
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(get(wire, job, query)))
    thread.start()
    return thread, answers


def server_listens() -> bool:
    """The server's waiting thread LISTENs (it starts with the first held request)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN ojs_settled'"
                       " AND datname = current_database()")
        return cursor.fetchone()[0] > 0


def test_a_held_request_answers_the_result_as_soon_as_the_job_completes(key, push):
    job = active(push)
    with serving(key, threads=2, environment=ONLY_NOTIFY) as wire:
        thread, answers = held_in_background(wire, job, "?wait=true&timeout=3600")
        wait_until(server_listens, PATIENCE, "the server to hold the request")
        assert not answers
        Job.objects.ack(job.id, result={"total": 42}, lease=Lease(worker_id="w1"))
        thread.join(PATIENCE)
    [(status, headers, body)] = answers
    assert status == 200
    assert body == {"job_id": str(job.id), "state": "completed", "result": {"total": 42}}
    assert "Retry-After" not in headers


def test_a_wait_that_ends_first_is_408_and_the_job_goes_on(key, push):
    job = active(push)
    with serving(key, threads=2) as wire:
        status, _, body = get(wire, job, "?wait=true&timeout=0.3")
    assert status == 408
    assert (body["error"]["code"], body["error"]["details"]) == ("timeout", {"job_id": str(job.id), "state": "active"})
    assert Job.objects.get(id=job.id).state == "active"


def test_without_wait_it_answers_at_once_and_ended_jobs_answer_at_once_with_their_error(key, push):
    running, failed, cancelled = active(push), active(push, retry={"max_attempts": 1}), active(push)
    Job.objects.fail(failed.id, Failure(type="Boom", message="no paper"), lease=Lease(worker_id="w1"))
    Job.objects.cancel(cancelled.id)
    with serving(key, threads=2) as wire:
        status, headers, body = get(wire, running)
        assert (status, body, headers["Retry-After"]) == (200, {"job_id": str(running.id), "state": "active",
                                                                "result": None}, "1")
        status, _, body = get(wire, failed, "?wait=true")
        assert (status, body["state"], body["result"], body["error"]["message"]) == (200, "discarded", None,
                                                                                     "no paper")
        status, _, body = get(wire, cancelled, "?wait=1&timeout=5")
        assert (status, body["state"]) == (200, "cancelled")


@pytest.mark.parametrize(("query", "field"), [
    ("?wait=maybe", "wait"), ("?wait=true&timeout=soon", "timeout"), ("?wait=true&timeout=-1", "timeout"),
    ("?wait=true&timeout=nan", "timeout"),
])
def test_bad_parameters_are_400(key, push, query, field):
    job = active(push)
    with serving(key) as wire:
        status, _, body = get(wire, job, query)
    assert (status, body["error"]["code"], body["error"]["details"]["field"]) == (400, "invalid_request", field)


def test_one_more_wait_than_a_process_holds_is_503_and_the_server_still_answers(key, push):
    job = active(push)
    with serving(key, threads=4, environment={"OJS_RESULT_WAITS": "1", **ONLY_NOTIFY}) as wire:
        thread, answers = held_in_background(wire, job, "?wait=true&timeout=3600")
        wait_until(server_listens, PATIENCE, "the server to hold the first request")
        status, headers, body = get(wire, job, "?wait=true&timeout=3600")
        assert (status, headers["Retry-After"]) == (503, "5")
        assert (body["error"]["code"], body["error"]["details"]["max_waits"]) == ("backend_unavailable", 1)
        # The threads the wait does not hold serve everything else, a read of the result too.
        assert get(wire, job)[0] == 200
        assert wire.send("GET", f"/ojs/v1/jobs/{job.id}")[0] == 200
        Job.objects.ack(job.id, result=1, lease=Lease(worker_id="w1"))
        thread.join(PATIENCE)
        assert answers[0][0] == 200
        # Its slot is back.
        assert get(wire, job, "?wait=true&timeout=1")[0] == 200


def test_a_timeout_past_the_maximum_is_cut_to_it(key, push):
    job = active(push)
    with serving(key, threads=2, environment={"OJS_RESULT_WAIT_MAX_SECONDS": "0.3"}) as wire:
        status, _, body = get(wire, job, "?wait=true&timeout=3600")
    assert (status, body["error"]["code"]) == (408, "timeout")


# How long nginx (proxy_read_timeout) and a load balancer (idle timeout) wait
# for a silent upstream by default: longer, and the client gets their 504.
PROXY_READ_TIMEOUT = 60


def test_the_longest_wait_answers_before_a_proxy_in_front_gives_up(api):
    """A held request sends nothing until it answers: the longest one must answer well before 60 s.

    At 60 s a client asking ``timeout=60`` through nginx's defaults got
    nginx's HTML 504 instead of the 408, the race lost by a few milliseconds.
    """
    results = api.get("/ojs/manifest").json()["capabilities"]["results"]
    assert results["wait_max_seconds"] <= PROXY_READ_TIMEOUT - 10


def test_with_the_default_caps_streams_and_waits_held_together_leave_a_thread_for_the_rest(key, push):
    """The example's 4 threads, the default caps: 2 progress streams and 2 waits took all four,
    and every other request -- health, a worker's FETCH, the 503 past the caps -- waited
    up to a minute for a held one to end."""
    from django_ojs.conf.defaults import DEFAULTS

    job = active(push)
    held = DEFAULTS["PROGRESS_STREAMS"] + DEFAULTS["RESULT_WAITS"]
    with serving(key, threads=4, environment=ONLY_NOTIFY) as wire:
        answers: list = []

        def send(path: str) -> None:
            try:
                answers.append(wire.send("GET", path)[0])
            except OSError as error:  # the stream cut when the server stops
                answers.append(error)

        paths = [f"/ojs/v1/jobs/{job.id}/progress/stream"] * 3 + [f"/ojs/v1/jobs/{job.id}/result?wait=true"] * 3
        for path in paths:
            threading.Thread(target=send, args=(path,), daemon=True).start()
        # One thread stays free: it refuses each request past the caps at once.
        wait_until(lambda: answers.count(503) == len(paths) - held, PATIENCE, "the requests past the caps refused")
        assert wire.send("GET", "/ojs/v1/health", key=False)[0] == 200
        assert wire.send("GET", f"/ojs/v1/jobs/{job.id}")[0] == 200
        # The job ends: the held wait answers and the streams close, so the server stops at once.
        Job.objects.ack(job.id, result=1, lease=Lease(worker_id="w1"))
        wait_until(lambda: len(answers) == len(paths), PATIENCE, "every held request to end with the job")
