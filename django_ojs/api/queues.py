"""Queue listing, statistics, pause and resume (ojs-http-binding §11)."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from ..core import queue_config, queues
from ..core.queue_config import render_config
from ..core.stats import queue_stats
from ..keys import INSPECT
from ..models import Queue
from ..protocol.durations import format_timestamp
from ..protocol.envelope import validate_queue_name
from ..protocol.errors import InvalidRequest
from .base import OJSView
from .pagination import page_of


def render_queue(queue: Queue | None, name: str) -> dict[str, Any]:
    paused = bool(queue and queue.paused)
    out: dict[str, Any] = {"name": name, "status": "paused" if paused else "active", "paused": paused}
    out["config"] = render_config(queue) if queue is not None else render_config(Queue(name=name))
    if queue is not None:
        out["created_at"] = format_timestamp(queue.created_at)
        if queue.paused_at:
            out["paused_at"] = format_timestamp(queue.paused_at)
        if queue.updated_at:
            out["updated_at"] = format_timestamp(queue.updated_at)
    return out


class QueueListView(OJSView):
    required_scope = INSPECT

    def get(self, request: Any) -> Response:
        page = page_of(request.query_params)
        rows, has_more = page.slice(Queue.objects.order_by("name"))
        return Response(
            {"queues": [render_queue(q, q.name) for q in rows], "pagination": page.meta(has_more)}
        )


class QueueStatsView(OJSView):
    required_scope = INSPECT

    def get(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        stats = queue_stats(name)
        computed_at = format_timestamp(stats.pop("computed_at"))
        queue = render_queue(Queue.objects.filter(name=name).first(), name)
        # openapi puts the counts on `queue`; the binding's prose under `stats`.
        return Response(
            {"queue": {**queue, **stats}, "status": queue["status"], "stats": stats, "computed_at": computed_at}
        )


class QueueView(OJSView):
    """ojs-queue-config §9.3: a queue's state, configuration and counts."""

    required_scope = INSPECT

    def get(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        stats = queue_stats(name)
        stats.pop("computed_at")
        body = render_queue(Queue.objects.filter(name=name).first(), name)
        body["state"] = body["status"]
        body["stats"] = stats
        return Response({**body, "queue": body})


class QueueConfigView(OJSView):
    """ojs-queue-config §9.1: read and change a queue's limits and bound (only the fields given)."""

    required_scope = {"GET": INSPECT, "PUT": "admin", "PATCH": "admin"}

    def get(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        queue = Queue.objects.filter(name=name).first() or Queue(name=name)
        return Response({"name": name, "config": render_config(queue)})

    def put(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        body = self.body()
        config = body.get("config", body)
        if not isinstance(config, dict):
            raise InvalidRequest("config must be an object", field="config")
        queue = queue_config.update(name, queue_config.parse_config(config, name))
        return Response({"name": name, "config": render_config(queue), "queue": render_queue(queue, name)})

    patch = put


class QueuePauseView(OJSView):
    required_scope = "admin"
    pause = True

    def post(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        queue = queues.pause(name) if self.pause else queues.resume(name)
        rendered = render_queue(queue, name)
        return Response({"queue": rendered, "status": rendered["status"]})


class QueueResumeView(QueuePauseView):
    pause = False
