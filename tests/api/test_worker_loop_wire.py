"""HTTP workers over the wire: the loop of one batch ACK carrying the next FETCH, through gunicorn
served by the production configuration, with keep-alive connections as a pooled client keeps them."""

from __future__ import annotations

import http.client
import json
import threading

from django.db.models import Count, Q

from django_ojs.models import ApiKey, Event, Job
from tests.api.gunicorn import MEDIA_TYPE, REPO, serving

JOBS = 400
WORKERS = 4


def worker_loop(port: int, key: str, name: str, handled: list[str], errors: list[BaseException]) -> None:
    """Acknowledge what the last turn claimed and claim the next ten, in one request, until none come."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": MEDIA_TYPE, "Authorization": f"Bearer {key}"}
    held: list[dict] = []
    try:
        while True:
            body = {"acks": [{"job_id": job["id"], "attempt": job["attempt"], "worker_id": name,
                              "result": {"by": name}} for job in held],
                    "fetch": {"queues": ["wire-loop"], "count": 10, "worker_id": name}}
            connection.request("POST", "/ojs/v1/workers/ack/batch", json.dumps(body), headers)
            response = connection.getresponse()
            reply = json.loads(response.read())
            assert response.status == 200, reply
            assert reply["refused"] == 0, reply
            held = reply["jobs"]
            handled.extend(job["id"] for job in held)
            if not held:
                return
    except BaseException as exc:  # reported by the test, in its own thread's words
        errors.append(exc)
    finally:
        connection.close()


def test_http_workers_looping_on_batch_acks_that_fetch_run_every_job_once(transactional_db):
    import django_ojs

    _, key = ApiKey.objects.issue("wire", ["admin"])
    django_ojs.enqueue_many([{"type": "wire.loop", "args": [n], "queue": "wire-loop"}
                             for n in range(JOBS)])
    with serving(key, workers=2, config=REPO / "example_project" / "gunicorn.conf.py") as wire:
        handled: list[str] = []
        errors: list[BaseException] = []
        threads = [threading.Thread(target=worker_loop, args=(wire.port, key, f"http-{n}", handled, errors))
                   for n in range(WORKERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        assert not any(thread.is_alive() for thread in threads)
    jobs = Job.objects.filter(queue="wire-loop")
    assert len(handled) == len(set(handled)) == JOBS
    assert jobs.filter(state="completed", attempt=1).count() == JOBS
    # Each completed by the worker that claimed it, with that worker's result.
    assert all(job.result == {"by": job.worker_id} for job in jobs)
    counts = Event.objects.filter(job_id__in=jobs.values("id")).values("job_id").annotate(
        started=Count("seq", filter=Q(type="job.started")), completed=Count("seq", filter=Q(type="job.completed")))
    assert {(row["started"], row["completed"]) for row in counts} == {(1, 1)}
