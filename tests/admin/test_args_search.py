"""The admin's search box finds jobs by their arguments; a malformed term says why, never a 500."""

from __future__ import annotations

from django.urls import reverse


def test_the_search_box_finds_jobs_by_an_argument(admin_client, make_job):
    wanted = make_job("available", args=[{"order_id": 1234, "currency": "EUR"}])
    make_job("available", args=[{"order_id": 999, "currency": "EUR"}])
    page = admin_client.get(reverse("admin:django_ojs_job_changelist"), {"q": "args.order_id=1234"})
    assert page.status_code == 200
    assert [job.pk for job in page.context["cl"].result_list] == [wanted.pk]


def test_a_malformed_json_fragment_shows_a_message_and_no_rows(admin_client, make_job):
    make_job("available", args=[1])
    page = admin_client.get(reverse("admin:django_ojs_job_changelist"), {"q": "args:{oops"})
    assert page.status_code == 200
    assert list(page.context["cl"].result_list) == []
    assert any("is not JSON" in str(message) for message in page.context["messages"])
