"""Queues (ojs-admin-api §6): list, detail, pause, resume, purge, configuration.

Counts and throughput come from ``core/stats.py``, the figures the admin's
queue page and the metrics show: exact up to a bound, the planner's estimate
past it (named in ``counts_estimated``). The configuration is the one the
admin's queue page edits (``core/queue_config.py``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rest_framework.response import Response

from ...conf import ojs_settings
from ...core import queue_config, queues
from ...core.clock import db_now
from ...core.queue_config import render_config
from ...core.selection import JobFilter
from ...core.stats import QueueFigures, queue_figures
from ...models import Queue
from ...protocol.durations import format_duration, format_timestamp
from ...protocol.envelope import validate_queue_name
from ...protocol.errors import InvalidRequest, NotFound
from ...protocol.states import TERMINAL
from .base import AdminView, confirmed, only_known, rendered_counts, timestamp_param
from .bulk import run
from .paging import PAGE_PARAMS, page_of

FINISHED = sorted(state.value for state in TERMINAL)


def render_queue(queue: Queue, figures: QueueFigures) -> dict[str, Any]:
    counts, estimated = rendered_counts(figures.counts)
    return {
        "name": queue.name,
        "state": "paused" if queue.paused else "active",
        "paused": queue.paused,
        "paused_at": format_timestamp(queue.paused_at),
        "counts": counts,
        "counts_estimated": estimated,
        # processed: jobs completed; failed: jobs discarded (the admin's "failed (discarded)").
        "throughput": {
            "processed_per_minute": round(figures.completed_per_minute, 2),
            "failed_per_minute": round(figures.failed_per_minute, 2),
        },
        "oldest_available_at": format_timestamp(figures.oldest_available_at),
        # Autoscaling signals (the metrics ojs_queue_oldest_available_age_seconds, ojs_queue_drain_seconds):
        # 0 when none waits; the estimate null while jobs wait and none finished in the last 5 minutes,
        # or the queue is paused.
        "oldest_available_age_seconds": figures.oldest_available_age_seconds,
        # False past QUEUE_HEAD_ROWS available jobs: the oldest among the next ones FETCH takes, a lower bound.
        "oldest_available_exact": figures.oldest_exact,
        "estimated_drain_seconds": figures.estimated_drain_seconds,
        "created_at": format_timestamp(queue.created_at),
    }


def render_detail(queue: Queue) -> dict[str, Any]:
    body = render_queue(queue, queue_figures([queue.name], db_now())[queue.name])
    retention = ojs_settings.RETENTION
    body["configuration"] = {
        **render_config(queue),
        # The project's, for every queue (OJS["RETENTION"]): no queue has its own.
        "retention": {
            state: format_duration(dt.timedelta(seconds=retention[state])) for state in ("completed", "discarded")
        },
    }
    body["updated_at"] = format_timestamp(queue.updated_at)
    return body


def queue_named(name: str) -> Queue:
    queue = Queue.objects.filter(name=validate_queue_name(name, "name")).first()
    if queue is None:
        raise NotFound(f"queue {name} not found: no job has used it and it was never configured",
                       details={"resource_type": "queue", "resource_id": name})
    return queue


class QueueListView(AdminView):
    query = {"GET": PAGE_PARAMS}

    def get(self, request: Any) -> Response:
        page = page_of(request.query_params)
        rows, has_more = page.slice(Queue.objects.order_by("name"))
        figures = queue_figures([queue.name for queue in rows], db_now())
        return Response({
            "items": [render_queue(queue, figures[queue.name]) for queue in rows],
            "pagination": page.meta(Queue.objects.count(), has_more),
        })


class QueueView(AdminView):
    def get(self, request: Any, name: str) -> Response:
        return Response(render_detail(queue_named(name)))


class QueuePauseView(AdminView):
    """§6.3, §6.4. A queue never used is paused all the same (its row is made): README, "Decisions"."""

    pause = True

    def post(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        queue = queues.pause(name) if self.pause else queues.resume(name)
        return Response({"name": name, "paused": queue.paused, "paused_at": format_timestamp(queue.paused_at),
                         "state": "paused" if queue.paused else "active"})


class QueueResumeView(QueuePauseView):
    pause = False


class QueueJobsView(AdminView):
    """§6.5 purge: ``DELETE /admin/queues/{name}/jobs`` with ``states``, ``older_than`` and ``confirm``.

    Finished jobs only: a waiting one is cancelled first (bulk cancel), so
    that whatever waits on it -- a workflow -- learns that it ended.
    """

    def delete(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        body = self.body()
        # An unread key would be a bound dropped: "olderThan" purged every finished job of the states.
        only_known(body, ("states", "older_than", "confirm"), "field")
        states = body.get("states")
        if not isinstance(states, list) or not states or not all(isinstance(s, str) for s in states):
            raise InvalidRequest(f"states must be a non-empty list of finished states ({', '.join(FINISHED)})",
                                 field="states")
        unfinished = sorted(set(states) - set(FINISHED))
        if unfinished:
            raise InvalidRequest(
                f"only finished jobs are purged ({', '.join(FINISHED)}), not {', '.join(unfinished)}: "
                "cancel waiting jobs first (POST /ojs/v1/admin/jobs/bulk/cancel)",
                field="states",
            )
        older_than = timestamp_param(body.get("older_than"), "older_than")
        confirmed(body)
        selection = JobFilter(queues=[name], states=states, finished_before=older_than).selection()
        report = run(selection, "delete")
        return Response({"purged_count": report["succeeded"], "states": sorted(set(states)),
                         "complete": report["complete"], "skipped_by_reason": report["skipped_by_reason"]})


class QueueConfigView(AdminView):
    """§6.6: the fields given change (concurrency, rate_limit, throttle, max_size, overflow_policy); null clears one."""

    def put(self, request: Any, name: str) -> Response:
        name = validate_queue_name(name, "name")
        body = self.body()
        if "retention" in body:
            raise InvalidRequest(
                "retention is the project's, for every queue (OJS['RETENTION']); a queue has none of its own",
                field="retention",
            )
        queue = queue_config.update(name, queue_config.parse_config(body, name))
        return Response(render_detail(queue))

    patch = put
