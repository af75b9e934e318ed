"""The dead letter over HTTP: list, get, retry, delete (ojs-http-binding §12).

The dead letter holds the jobs kept as dead letters and no plain discard
(core/dead_letter.py, docs/explanation/decisions.md).
"""

from __future__ import annotations

import pytest

from django_ojs.models import Job, JobError
from django_ojs.protocol.failure import Failure


@pytest.fixture
def discard(claim):
    """``discard(dead_letter=True, queue="q")``: a job that failed its only attempt."""

    def make(*, dead_letter: bool = True, queue: str | None = None) -> Job:
        options = {"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter" if dead_letter else "discard"}}
        job = claim(options=options)
        if queue:
            Job.objects.filter(pk=job.pk).update(queue=queue)
        Job.objects.fail(job.id, Failure(type="Fatal", message="gave up"))
        return Job.objects.get(pk=job.pk)

    return make


def test_the_list_shows_dead_letters_newest_first_with_their_history_and_no_plain_discard(api, discard, push):
    older, _plain, newer = discard(), discard(dead_letter=False), discard()
    push()
    body = api.get("/ojs/v1/dead-letter").json()
    assert [job["id"] for job in body["jobs"]] == [str(newer.id), str(older.id)]
    assert [job["dead_letter"] for job in body["jobs"]] == [True, True]
    assert body["jobs"][0]["errors"][0]["type"] == "Fatal"
    assert body["pagination"]["total"] == 2


@pytest.mark.parametrize(("query", "expected"), [("dead_letter=true", 1), ("queue=other", 1), ("queue=default", 0),
                                                 ("type=test.job", 1), ("type=else", 0)])
def test_the_list_filters(api, discard, query, expected):
    discard(queue="other")
    discard(dead_letter=False, queue="other")
    assert len(api.get(f"/ojs/v1/dead-letter?{query}").json()["jobs"]) == expected


def test_asking_for_plain_discards_is_a_400_that_says_where_they_are(api, discard):
    discard(dead_letter=False)
    response = api.get("/ojs/v1/dead-letter?dead_letter=false")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and "/ojs/v1/admin/jobs?state=discarded" in error["message"]


def test_a_plain_discard_is_not_in_the_dead_letter_and_keeps_it_so(api, discard):
    job = discard(dead_letter=False)
    for response in (api.get(f"/ojs/v1/dead-letter/{job.id}"), api.post(f"/ojs/v1/dead-letter/{job.id}/retry"),
                     api.delete(f"/ojs/v1/dead-letter/{job.id}")):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    after = Job.objects.get(pk=job.pk)
    assert (after.state, after.dead_letter, after.attempt) == ("discarded", False, 1)
    assert JobError.objects.filter(job=job).count() == 1


def test_the_list_pages(api, discard):
    for _ in range(3):
        discard()
    first = api.get("/ojs/v1/dead-letter?limit=2").json()
    assert len(first["jobs"]) == 2 and first["pagination"]["has_more"] is True
    rest = api.get(f"/ojs/v1/dead-letter?limit=2&cursor={first['pagination']['next_cursor']}").json()
    assert len(rest["jobs"]) == 1


@pytest.mark.parametrize("query", ["dead_letter=maybe", "queue=Bad Queue", "limit=1000"])
def test_bad_list_filters_are_400(api, query):
    assert api.get(f"/ojs/v1/dead-letter?{query}").status_code == 400


def test_get_shows_one_dead_letter_job(api, discard):
    job = discard()
    body = api.get(f"/ojs/v1/dead-letter/{job.id}").json()["job"]
    assert (body["id"], body["state"], body["dead_letter"]) == (str(job.id), "discarded", True)
    assert len(body["errors"]) == 1


def test_get_of_a_job_outside_the_dead_letter_is_404(api, push):
    assert api.get(f"/ojs/v1/dead-letter/{push().id}").status_code == 404


def test_retry_requeues_with_fresh_attempts(api, discard):
    job = discard()
    response = api.post(f"/ojs/v1/dead-letter/{job.id}/retry", {})
    assert response.status_code == 200
    body = response.json()["job"]
    assert (body["state"], body["attempt"]) == ("available", 0)
    assert "error" not in body and "dead_letter" not in body
    assert body["re_enqueued_at"] == body["enqueued_at"]
    assert api.get(f"/ojs/v1/dead-letter/{job.id}").status_code == 404


def test_retry_of_a_job_that_is_not_discarded_is_404_it_is_not_in_the_dead_letter(api, push):
    response = api.post(f"/ojs/v1/dead-letter/{push().id}/retry")  # openapi: 200 or 404
    assert response.status_code == 404
    assert response.json()["error"]["details"]["resource_type"] == "dead_letter_job"


def test_delete_purges_the_job_and_its_history(api, discard):
    job = discard()
    body = api.delete(f"/ojs/v1/dead-letter/{job.id}").json()
    assert (body["deleted"], body["job_id"], body["id"]) == (True, str(job.id), str(job.id))
    assert api.get(f"/ojs/v1/dead-letter/{job.id}").status_code == 404
    assert api.get(f"/ojs/v1/jobs/{job.id}").status_code == 404
    assert not JobError.objects.exists()


def test_delete_of_a_job_outside_the_dead_letter_is_404_and_keeps_it(api, push):
    job = push()
    assert api.delete(f"/ojs/v1/dead-letter/{job.id}").status_code == 404
    assert Job.objects.filter(pk=job.pk).exists()


def test_a_malformed_dead_letter_id_is_400(api):
    assert api.delete("/ojs/v1/dead-letter/xyz").status_code == 400
