"""Queue listing, statistics, pause and resume (ojs-http-binding §11)."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from ..durations import format_timestamp
from ..envelope import validate_queue_name
from ..models import Queue
from .base import OJSView
from .pagination import page_of


def render_queue(queue: Queue | None, name: str) -> dict[str, Any]:
    paused = bool(queue and queue.paused)
    out: dict[str, Any] = {"name": name, "status": "paused" if paused else "active", "paused": paused}
    if queue is not None:
        out["created_at"] = format_timestamp(queue.created_at)
        if queue.paused_at:
            out["paused_at"] = format_timestamp(queue.paused_at)
    return out


class QueueListView(OJSView):
    def get(self, request: Any) -> Response:
        page = page_of(request.query_params)
        rows, has_more = page.slice(Queue.objects.order_by("name"))
        return Response(
            {"queues": [render_queue(q, q.name) for q in rows], "pagination": page.meta(has_more)}
        )


class QueueStatsView(OJSView):
    def get(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        stats = Queue.objects.stats(name)
        computed_at = format_timestamp(stats.pop("computed_at"))
        queue = render_queue(Queue.objects.filter(name=name).first(), name)
        # openapi puts the counts on `queue`; the binding's prose under `stats`.
        return Response(
            {"queue": {**queue, **stats}, "status": queue["status"], "stats": stats, "computed_at": computed_at}
        )


class QueuePauseView(OJSView):
    required_scope = "admin"
    pause = True

    def post(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        queue = Queue.objects.pause(name) if self.pause else Queue.objects.resume(name)
        rendered = render_queue(queue, name)
        return Response({"queue": rendered, "status": rendered["status"]})


class QueueResumeView(QueuePauseView):
    pause = False
