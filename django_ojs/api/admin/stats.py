"""Statistics (ojs-admin-api §10): the aggregate now, and the history by minute, hour or day.

The aggregate's counts and rates are ``core/stats.py``'s, as the admin's
overview shows them; the history is ``core/history.py``'s, as the overview's
chart draws it. On the wire, ``processed`` is jobs completed and ``failed``
jobs discarded (the admin's "failed (discarded)"); ``enqueued`` and
``retried`` are the events' (null with ``OJS["EVENTS"]`` off).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rest_framework.response import Response

from ...core import history, maintenance_mode
from ...core.clock import db_now
from ...core.stats import state_counts, throughput
from ...core.workers import DEAD, shown_state
from ...models import Queue, Worker
from ...protocol.durations import format_timestamp
from ...protocol.envelope import validate_queue_name
from ...protocol.states import JobState
from ..system import uptime_seconds
from .base import AdminView, rendered_counts, timestamp_param

# The wire's names for the history's transitions (ojs-admin-api §10.2 names the first three).
WIRE_NAMES = {"completed": "processed", "discarded": "failed", "enqueued": "enqueued", "retried": "retried",
              "cancelled": "cancelled"}
DEFAULT_SINCE = dt.timedelta(hours=1)


class StatsView(AdminView):
    """§10.1."""

    def get(self, request: Any) -> Response:
        now = db_now()
        counts, estimated = rendered_counts(state_counts())
        rates = throughput(now)
        # The sum of the queues' rates, each over its span as the queue list takes it: a queue that
        # started a minute ago counts at its rate in that minute here as there, and the whole agrees
        # with its parts (over the plain window it read less than half their sum at first).
        per_minute = {state: 0.0 for state in (JobState.COMPLETED.value, JobState.DISCARDED.value)}
        for queue, per_state in rates.per_queue.items():
            minutes = rates.span_of(queue, now).total_seconds() / 60
            for state in per_minute:
                per_minute[state] += per_state.get(state, 0) / minutes
        live = sum(1 for worker in Worker.objects.only("state", "last_heartbeat_at", "declared_dead_at")
                   if shown_state(worker, now) != DEAD)
        return Response({
            "queues": Queue.objects.count(),
            "workers": live,
            "jobs": counts,
            "jobs_estimated": estimated,
            "throughput": {
                "processed_per_minute": round(per_minute[JobState.COMPLETED.value], 2),
                "failed_per_minute": round(per_minute[JobState.DISCARDED.value], 2),
                "window_seconds": round(rates.window.total_seconds()),
            },
            "uptime_seconds": uptime_seconds(),
            "maintenance": maintenance_mode.current().enabled,
            "computed_at": format_timestamp(now),
        })


class HistoryView(AdminView):
    """§10.2: ``period`` (1m, 5m, 1h, 1d; 5m by default), ``since`` (an hour ago), ``until`` (now), ``queue``."""

    query = {"GET": ("period", "since", "until", "queue")}

    def get(self, request: Any) -> Response:
        params = request.query_params
        now = db_now()
        until = history.readable(timestamp_param(params.get("until"), "until") or now, "until")
        since = timestamp_param(params.get("since"), "since") or until - DEFAULT_SINCE
        queue = validate_queue_name(params["queue"], "queue") if params.get("queue") else None
        found = history.series(params.get("period") or "5m", since, until, now, queue)
        return Response({
            "period": found.period,
            "since": format_timestamp(found.slots[0]),
            "until": format_timestamp(found.slots[-1] + found.length),
            "queue": queue,
            "counted_through": format_timestamp(found.counted_through),
            "data": [
                {"timestamp": format_timestamp(slot),
                 **{WIRE_NAMES[name]: found.values[name][index] for name in history.TRANSITIONS}}
                for index, slot in enumerate(found.slots)
            ],
        })
