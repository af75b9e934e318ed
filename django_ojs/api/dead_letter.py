"""The dead letter: discarded jobs, listed, retried or purged (ojs-http-binding §12).

Every discarded job is listed, each with ``dead_letter`` telling whether its
policy asked to keep it (``on_exhaustion: "dead_letter"``); ``?dead_letter=
true`` lists only those (docs/explanation/decisions.md).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Prefetch
from rest_framework.response import Response

from ..conf import ojs_settings
from ..core import control
from ..core.stats import dead_letter_stats
from ..models import Job, JobError
from ..protocol.durations import format_duration, format_timestamp
from ..protocol.envelope import parse_job_ref, render_job, validate_queue_name
from ..protocol.errors import InvalidRequest, NotFound
from ..protocol.states import JobState
from .base import OJSView
from .pagination import page_of


class DeadLetterListView(OJSView):
    def get(self, request: Any) -> Response:
        params = request.query_params
        page = page_of(params)
        jobs = Job.objects.filter(state=JobState.DISCARDED)
        if params.get("queue"):
            jobs = jobs.filter(queue=validate_queue_name(params["queue"], "queue"))
        if params.get("type"):
            jobs = jobs.filter(type=params["type"])
        flag = params.get("dead_letter")
        if flag is not None:
            if flag not in ("true", "false"):
                raise InvalidRequest("dead_letter must be 'true' or 'false'", field="dead_letter")
            jobs = jobs.filter(dead_letter=flag == "true")
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


class DeadLetterStatsView(OJSView):
    """ojs-dead-letter §10.1."""

    def get(self, request: Any) -> Response:
        stats = dead_letter_stats()
        retention = ojs_settings.RETENTION
        return Response(
            {
                "total": stats["total"],
                "dead_letter": stats["dead_letter"],
                "by_queue": stats["by_queue"],
                "by_error_type": stats["by_error_type"],
                "oldest_at": format_timestamp(stats["oldest"]),
                "newest_at": format_timestamp(stats["newest"]),
                "retention": {
                    "max_age": format_duration(dt.timedelta(seconds=retention["dead_letter"])),
                    "max_count": retention["dead_letter_max_count"],
                    "discarded_max_age": format_duration(dt.timedelta(seconds=retention["discarded"])),
                },
            }
        )


class DeadLetterRetryView(OJSView):
    required_scope = "admin"

    def post(self, request: Any, job_id: str) -> Response:
        job = control.resurrect(parse_job_ref(job_id, "id"))
        body = render_job(job)
        body["re_enqueued_at"] = body.get("enqueued_at")
        return Response({"job": body})


class DeadLetterJobView(OJSView):
    required_scope = {"GET": "read", "DELETE": "admin"}

    def get(self, request: Any, job_id: str) -> Response:
        # By id alone (a state condition can make PostgreSQL walk every finished job: core/control._move).
        job = Job.objects.filter(id=parse_job_ref(job_id, "id")).first()
        if job is None or job.state != JobState.DISCARDED:
            raise NotFound(f"dead letter job {job_id} not found",
                           details={"resource_type": "dead_letter_job", "resource_id": job_id})
        return Response({"job": render_job(job, errors=job.errors.all())})

    def delete(self, request: Any, job_id: str) -> Response:
        ref = parse_job_ref(job_id, "id")
        control.purge_dead(ref)
        return Response({"deleted": True, "job_id": str(ref), "id": str(ref)})
