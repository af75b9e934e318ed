"""The dead letter: jobs kept as dead letters, listed, retried or purged (ojs-http-binding §12).

The dead letter is the discarded jobs whose policy asked to keep them
(``on_exhaustion: "dead_letter"``, ``"dead_letter": true`` in their record),
and no others (core/dead_letter.py): a plain discard is not listed, not
counted, and ``/dead-letter/{id}`` answers 404 for it (docs/explanation/decisions.md).
The admin API's dead letter (``api/admin/dead_letter.py``) serves the same jobs.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch
from rest_framework.response import Response

from ..conf import ojs_settings
from ..core import control
from ..core.dead_letter import dead_letter_jobs, find, retention
from ..core.stats import dead_letter_stats
from ..keys import INSPECT
from ..models import JobError
from ..protocol.durations import format_duration, format_timestamp
from ..protocol.envelope import parse_job_ref, render_job, validate_queue_name
from ..protocol.errors import InvalidRequest
from .base import OJSView
from .pagination import page_of


class DeadLetterListView(OJSView):
    required_scope = INSPECT

    def get(self, request: Any) -> Response:
        params = request.query_params
        page = page_of(params)
        jobs = dead_letter_jobs()
        if params.get("queue"):
            jobs = jobs.filter(queue=validate_queue_name(params["queue"], "queue"))
        if params.get("type"):
            jobs = jobs.filter(type=params["type"])
        # Before the dead letter held only dead letters, ?dead_letter= chose between
        # them and plain discards; "true" is what the list is, "false" asks for jobs it never holds.
        if params.get("dead_letter", "true") != "true":
            raise InvalidRequest(
                "the dead letter holds only jobs kept as dead letters; plain discards are listed by "
                "GET /ojs/v1/admin/jobs?state=discarded",
                field="dead_letter",
            )
        total = jobs.count()
        rows, has_more = page.slice(
            jobs.order_by("-finished_at", "-seq").prefetch_related(
                Prefetch("errors", queryset=JobError.objects.order_by("id"))
            )
        )
        return Response(
            {
                "jobs": [render_job(job, errors=job.errors.all()) for job in rows],
                "pagination": page.meta(has_more, total),
            }
        )


def render_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """The dead letter's figures as both doors render them (``/dead-letter/stats``, ``/admin/dead-letter/stats``)."""
    return {
        "total": stats["total"],
        "by_queue": stats["by_queue"],
        "by_error_type": stats["by_error_type"],
        "oldest_at": format_timestamp(stats["oldest"]),
        "newest_at": format_timestamp(stats["newest"]),
        "retention": {
            "max_age": format_duration(retention(dead_letter=True)),
            "max_count": ojs_settings.RETENTION["dead_letter_max_count"],
        },
    }


class DeadLetterStatsView(OJSView):
    """ojs-dead-letter §10.1."""

    required_scope = INSPECT

    def get(self, request: Any) -> Response:
        return Response(render_stats(dead_letter_stats()))


class DeadLetterRetryView(OJSView):
    required_scope = "admin"

    def post(self, request: Any, job_id: str) -> Response:
        job = control.resurrect(parse_job_ref(job_id, "id"), dead_letter_only=True)
        body = render_job(job)
        body["re_enqueued_at"] = body.get("enqueued_at")
        return Response({"job": body})


def shown_dead_letter(job_id: str) -> dict[str, Any]:
    """One dead letter with its error history; 404 for a job that is not one (a plain discard too)."""
    job = find(parse_job_ref(job_id, "id"))
    return {"job": render_job(job, errors=job.errors.all())}


def delete_dead_letter(job_id: str) -> str:
    """Delete one dead letter for good; its id. 404 for a job that is not one."""
    ref = parse_job_ref(job_id, "id")
    control.purge_dead(ref, dead_letter_only=True)
    return str(ref)


class DeadLetterJobView(OJSView):
    required_scope = {"GET": INSPECT, "DELETE": "admin"}

    def get(self, request: Any, job_id: str) -> Response:
        return Response(shown_dead_letter(job_id))

    def delete(self, request: Any, job_id: str) -> Response:
        ref = delete_dead_letter(job_id)
        return Response({"deleted": True, "job_id": ref, "id": ref})
