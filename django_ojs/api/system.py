"""Health, the conformance manifest, the event feed, and the test-only reset."""

from __future__ import annotations

import os
import time
from typing import Any

from django.db import connection
from django.http import HttpResponse
from rest_framework.response import Response

from ..conf import ojs_settings
from ..core import maintenance_mode
from ..core.events import events_of_job_types
from ..core.stats import THROUGHPUT_WINDOW
from ..core.testing import reset_store
from ..keys import INSPECT
from ..models import Event
from ..protocol.durable import MAX_CHECKPOINT_BYTES, MAX_STEP_NAME_CHARS, MAX_STEP_RESULT_BYTES
from ..protocol.durations import format_timestamp
from ..protocol.errors import InvalidRequest, NotFound
from ..protocol.progress import MAX_DATA_BYTES, MAX_MESSAGE_CHARS, MILESTONES
from ..protocol.waits import MAX_DELAY, MAX_PAYLOAD_BYTES
from ..protocol.workflows import MAX_DEPTH
from ..version import __version__
from .base import OJS_VERSION, OJSView
from .errors import RETRY_AFTER, database_outage
from .pagination import int_param


def _process_started() -> float:
    """When this process started, on the monotonic clock.

    Not when this module was imported: a server process imports the API's views at
    its first request to them, which may come long after it started (a gunicorn
    process the load balancer had sent other requests). Linux says when the process
    started (``/proc``); elsewhere the import is the best there is.
    """
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            # Fields after the command's closing parenthesis start at the third; starttime is the 22nd.
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            since_boot = float(uptime.read().split()[0])
        return time.monotonic() - max(0.0, since_boot - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic()


STARTED = _process_started()
BACKENDS = {"postgresql": "postgres", "sqlite": "sqlite"}
MAX_EVENTS = 1000
MAX_CURSOR = 2**63 - 1  # the event sequence is a bigint


def uptime_seconds() -> int:
    """How long this process has served: health and the admin API's statistics say the same."""
    return int(time.monotonic() - STARTED)


class HealthView(OJSView):
    """§8.1: served without credentials, for load balancers and orchestrators."""

    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request: Any) -> Response:
        backend: dict[str, Any] = {"type": BACKENDS.get(connection.vendor, connection.vendor)}
        began = time.perf_counter()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            backend.update(status="connected", latency_ms=round((time.perf_counter() - began) * 1000))
            status, code = "ok", 200
        except Exception as exc:  # any database failure means "not ready"
            database_outage.failed(exc)
            backend.update(status="disconnected", error=type(exc).__name__)
            status, code = "degraded", 503
        body = {
            "status": status,
            "version": OJS_VERSION,
            "uptime_seconds": uptime_seconds(),
            "backend": backend,
        }
        if code == 200:
            # Healthy and in maintenance: still 200, so that load balancers keep
            # sending the admin API the request that ends it (README, "Decisions").
            body["maintenance"] = maintenance_mode.current().to_dict()
        headers = {"Retry-After": str(RETRY_AFTER)} if code == 503 else None
        return Response(body, status=code, headers=headers)


UNIQUE_MECHANISM = {
    "postgresql": "partial unique index on the job's unique key over the states it holds it in",
    "sqlite": "partial unique index on the job's unique key (writers serialised)",
}


# Which conformance levels (ojs-conformance §2) this server implements in full.
LEVELS_IMPLEMENTED = {0: True, 1: True, 2: True, 3: True, 4: True}


def conformance_level() -> int:
    """The highest level whose levels below are all implemented: each level
    presumes the ones before it (§2.5: level 4 needs 0-3)."""
    level = -1
    while LEVELS_IMPLEMENTED.get(level + 1):
        level += 1
    return level


# The official extensions served (each ojs-<name>.md, urn:ojs:ext:<name>), and our own
# worker registration. Named as the binding's manifest names them (§21.2: a list of names).
EXTENSIONS = ("admin-api", "dead-letter", "durable-steps", "graceful-shutdown", "progress", "queue-config",
              "rate-limiting", "timeouts")
# Our own, beyond the official ones: each described under capabilities and on the docs site.
OWN_EXTENSIONS = ("batch-ack", "fair-queues", "signals", "snooze", "worker-registration")
ADMIN_BASE = "/ojs/v1/admin"
ADMIN_API_VERSION = "1.0.0-rc.1"
# The sections of ojs-admin-api served under ADMIN_BASE (§11, the dead letter, is not yet).
ADMIN_SECTIONS = ["queues", "jobs", "bulk", "workers", "stats", "stats_history", "maintenance", "config"]


def extensions_served() -> list[str]:
    observability = ["observability"] if ojs_settings.METRICS or ojs_settings.TRACING else []
    return sorted([*EXTENSIONS, *observability, *OWN_EXTENSIONS])


def batch_ack_features() -> dict[str, Any]:
    """The batch ACK extension (docs/reference/http/workers.md): its endpoint and bounds, that
    each ACK is settled on its own (one refused attempt does not refuse the others), and that a
    batch may carry the worker's next FETCH, claimed in the same transaction."""
    return {
        "endpoint": "/ojs/v1/workers/ack/batch",
        "max_acks": ojs_settings.MAX_FETCH_COUNT,
        "max_body_bytes": ojs_settings.MAX_BATCH_BYTES,
        "max_ack_bytes": ojs_settings.MAX_ENVELOPE_BYTES,
        "outcome": "per ack",
        "carries_fetch": True,
    }


def fair_queue_features() -> dict[str, Any]:
    """The fair queues extension (docs/how-to/fair-queues.md): where a queue names its key, the
    paths a key may take, the order FETCH serves in."""
    return {
        "config_field": "fairness_key",
        "weights_fields": ["fairness_weights", "fairness_default_weight"],
        "paths": ["meta.<name>", "args.<index>", "args.<index>.<name>"],
        "across_values": "weighted round_robin: a value of weight w takes up to w claims a round; "
                         "the value whose round ended longest ago first",
        "within_value": "priority, then enqueue order",
    }


def autoscaling_signals() -> dict[str, Any]:
    """Per queue, what an autoscaler reads: the metrics and the admin API's queue fields."""
    return {
        "metrics": ["ojs_queue_oldest_available_age_seconds", "ojs_queue_drain_seconds"],
        "admin_queue_fields": ["oldest_available_age_seconds", "estimated_drain_seconds"],
        "drain_rate_window_seconds": int(THROUGHPUT_WINDOW.total_seconds()),
    }


def waits_features() -> dict[str, Any]:
    """This server's snooze and signals extension (docs/reference/http/waits.md): its endpoints,
    its bounds, and the job attributes INFO adds."""
    return {
        "snooze": "/ojs/v1/workers/snooze",
        "wait": "/ojs/v1/workers/wait",
        "job_signal": "/ojs/v1/jobs/{id}/signal",
        "workflow_signal": "/ojs/v1/workflows/{id}/signal",
        "max_snoozes": ojs_settings.MAX_SNOOZES,
        "max_delay_seconds": int(MAX_DELAY.total_seconds()),
        "max_payload_bytes": MAX_PAYLOAD_BYTES,
        "attempt_charged": False,
        "duplicate_signal": "conflict",
        "job_attributes": ["snoozes", "signals", "waiting"],
        "events": ["job.snoozed", "job.waiting", "job.signalled"],
    }


def progress_features() -> dict[str, Any]:
    """What of ojs-progress is served (§12): the report's members and bounds, how often
    it becomes an event, the stream, the workflow aggregate, and checkpoints (§6.4)."""
    return {
        "members": ["progress", "data", "message", "checkpoint"],
        "max_data_bytes": MAX_DATA_BYTES,
        "max_message_chars": MAX_MESSAGE_CHARS,
        "checkpoints": True,
        "max_checkpoint_bytes": MAX_CHECKPOINT_BYTES,
        "event_interval_seconds": ojs_settings.PROGRESS_EVENT_INTERVAL,
        "event_milestones": list(MILESTONES),
        "stream": "/ojs/v1/jobs/{id}/progress/stream",
        "stream_max_seconds": ojs_settings.PROGRESS_STREAM_SECONDS,
        "workflow_progress": "/ojs/v1/workflows/{id}/progress",
    }


def results_features() -> dict[str, Any]:
    """What of ojs-results is served: the blocking wait (§8.2) and its bounds. Not the whole
    extension (no ``result_ttl``, bulk retrieval or stream), so "results" is not in ``extensions``."""
    return {
        "blocking_wait": "/ojs/v1/jobs/{id}/result?wait=true&timeout={seconds}",
        "wait_max_seconds": ojs_settings.RESULT_WAIT_MAX_SECONDS,
        "wait_per_process": ojs_settings.RESULT_WAITS,
        "bulk_retrieval": False,
        "stream": False,
    }


def workflow_features() -> dict[str, Any]:
    """The django-ojs extensions of workflows: a running batch or group takes more jobs."""
    return {"grow": "/ojs/v1/workflows/{id}/jobs"}


def durable_steps_features() -> dict[str, Any]:
    """The ``durable-steps`` extension (django-ojs): where a step is recorded and its bounds."""
    return {
        "record": "/ojs/v1/jobs/{id}/steps/{name}",
        "max_result_bytes": MAX_STEP_RESULT_BYTES,
        "max_name_chars": MAX_STEP_NAME_CHARS,
        "stale_attempt": 409,
        "event": "job.step_completed",
    }


class ManifestView(OJSView):
    """§21: what this server implements, served without credentials for discovery."""

    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request: Any) -> Response:
        return Response(
            {
                # ojs-conformance and openapi say `specversion`, the binding `ojs_version`.
                "specversion": OJS_VERSION,
                "ojs_version": OJS_VERSION,
                "implementation": {
                    "name": "django-ojs",
                    "version": __version__,
                    "language": "python",
                    "homepage": "https://github.com/django-ojs/django-ojs",
                },
                "conformance_level": conformance_level(),
                "conformance_tier": "scheduled",
                "protocols": ["http"],
                "backend": BACKENDS.get(connection.vendor, connection.vendor),
                "capabilities": {
                    "batch_enqueue": True,
                    "cron_jobs": True,
                    "dead_letter": True,
                    "delayed_jobs": True,
                    "job_ttl": True,
                    "priority_queues": True,
                    "pause_resume": True,
                    "events": bool(ojs_settings.EVENTS),
                    "rate_limiting": {
                        "scope": ["job_key", "queue"],
                        "strategies": ["concurrency", "rate", "throttle"],
                        "window": "sliding",
                        "on_limit": ["wait", "reschedule", "drop"],
                        "enforcement": "at FETCH, under a per-key database lock, from job rows and a start log",
                    },
                    "schema_validation": False,
                    "unique_jobs": {
                        "strength": "strong",
                        "mechanism": UNIQUE_MECHANISM.get(connection.vendor, "partial unique index"),
                        "on_conflict": ["reject", "replace", "replace_except_schedule", "ignore"],
                    },
                    "bounded_queues": True,
                    "workflows": True,
                    "workflow_primitives": ["chain", "group", "batch", "dag"],
                    "workflow_max_nesting_depth": MAX_DEPTH,
                    "admin_api": {"base_url": ADMIN_BASE, "version": ADMIN_API_VERSION, "sections": ADMIN_SECTIONS},
                    "progress": progress_features(),
                    "fair_queues": fair_queue_features(),
                    "autoscaling_signals": autoscaling_signals(),
                    "snooze_and_signals": waits_features(),
                    "results": results_features(),
                    "workflow_extensions": workflow_features(),
                    "durable_steps": durable_steps_features(),
                    "batch_ack": batch_ack_features(),
                },
                "extensions": extensions_served(),
                "auth": {"scheme": "bearer", "required": bool(ojs_settings.AUTH_REQUIRED)},
                "endpoints": {"base_url": "/ojs/v1", "manifest": "/ojs/manifest", "health": "/ojs/v1/health",
                              "admin": ADMIN_BASE},
            }
        )


def render_event(event: Event) -> dict[str, Any]:
    """The CloudEvents-style envelope of ojs-events §2."""
    out = {
        "specversion": OJS_VERSION,
        "id": f"evt_{event.id}",
        "type": event.type,
        "source": "ojs://django-ojs",
        "time": format_timestamp(event.time),
        "datacontenttype": "application/json",
        "data": event.data,
    }
    if event.job_id:
        out["subject"] = str(event.job_id)
    return out


class EventListView(OJSView):
    """ojs-events §6.4 polling: oldest first; ``after`` is the cursor of the last page."""

    required_scope = INSPECT

    def get(self, request: Any) -> Response:
        params = request.query_params
        events = Event.objects.order_by("seq")
        after = params.get("after") or params.get("cursor")
        if after:
            # isdigit() alone also accepts "²" and other digits int() refuses;
            # a cursor past the 64-bit sequence overflows the query.
            if not (after.isascii() and after.isdigit()) or int(after) > MAX_CURSOR:
                raise InvalidRequest("after must be the cursor of a previous page", field="after")
            events = events.filter(seq__gt=int(after))
        if params.get("queues"):
            events = events.filter(queue__in=params["queues"].split(","))
        if params.get("job_types"):
            events = events.filter(events_of_job_types(params["job_types"].split(",")))
        if params.get("types"):
            events = events.filter(_type_filter(params["types"].split(",")))
        limit = int_param(params, "limit", 100)
        if not 1 <= limit <= MAX_EVENTS:
            raise InvalidRequest(f"limit must be from 1 to {MAX_EVENTS}", field="limit")
        rows = list(events[: limit + 1])
        page = rows[:limit]
        return Response(
            {
                "events": [render_event(event) for event in page],
                "cursor": str(page[-1].seq) if page else after,
                "has_more": len(rows) > limit,
            }
        )


def _type_filter(types: list[str]):
    from django.db.models import Q

    query = Q()
    for kind in filter(None, (t.strip() for t in types)):
        # ojs-events §6.1: "job.*" matches every job event.
        query |= Q(type__startswith=kind[:-1]) if kind.endswith("*") else Q(type=kind)
    return query


class ResetView(OJSView):
    """POST /ojs/v1/_test/reset for the conformance runner's ``--reset-url``."""

    required_scope = "admin"

    def post(self, request: Any) -> Response:
        if not ojs_settings.TEST_HOOKS:
            raise NotFound("not found")

        reset_store()
        return Response({"reset": True})


class MetricsView(OJSView):
    """Prometheus exposition (docs/how-to/metrics.md): any key may scrape it, as any may read."""

    required_scope = INSPECT

    def get(self, request: Any) -> HttpResponse:
        if not ojs_settings.METRICS:
            raise NotFound('metrics are off: set OJS["METRICS"] = True (and install django-ojs[prometheus])',
                           details={"resource_type": "endpoint", "resource_id": "metrics"},
                           hint="This endpoint serves only with the metrics on: "
                                "the Metrics how-to of the django-ojs docs says how.")
        # The "prometheus" extra: imported only with the metrics on.
        from prometheus_client import CONTENT_TYPE_LATEST

        from ..observe.metrics import exposition  # needs prometheus_client

        response = HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
        response["Cache-Control"] = "no-cache"
        return response
