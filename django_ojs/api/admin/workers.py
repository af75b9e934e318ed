"""Workers (ojs-admin-api §9): list with a summary by state, detail with the jobs it holds, quiet, deregister.

What state an operator is told a worker is in is decided in one place,
``core.workers.shown_state``, which the admin, ``manage.py ojs workers`` and the
metrics use too. The count of jobs a worker holds comes from the jobs table
(``core.workers.held_counts``), not from what its last heartbeat said.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from rest_framework.response import Response

from ...conf import ojs_settings
from ...core import workers
from ...core.clock import db_now
from ...core.workers import DEAD, SHOWN_STATES, held_counts, overrun_shown, shown_state
from ...models import Job, Worker
from ...protocol.durations import format_timestamp
from ...protocol.errors import Conflict, NotFound
from ...protocol.states import JobState, WorkerState
from ...protocol.storable import check_string
from .base import AdminView
from .jobs import listed, render_listed
from .paging import PAGE_PARAMS, page_of

# The jobs a worker detail lists (a worker holds at most its concurrency).
HELD_SHOWN = 1000


def render_worker(worker: Worker, now: dt.datetime, held: int) -> dict[str, Any]:
    return {
        "id": worker.id,
        "hostname": worker.hostname,
        "pid": worker.pid,
        "state": shown_state(worker, now),
        "reported_state": worker.state,
        "directive": worker.directive,
        "directive_set_at": format_timestamp(worker.directive_set_at),
        "queues": worker.queues,
        "handles": worker.handles,
        "concurrency": worker.concurrency,
        "labels": worker.labels,
        "active_jobs": held,
        # Handlers still running though their job ended: slots the worker cannot use.
        "overrun_handlers": overrun_shown(worker, now),
        "started_at": format_timestamp(worker.started_at),
        "registered_at": format_timestamp(worker.registered_at),
        "last_heartbeat_at": format_timestamp(worker.last_heartbeat_at),
        "declared_dead_at": format_timestamp(worker.declared_dead_at),
        # Kept when it comes back: null only for a worker never declared dead.
        "last_declared_dead_at": format_timestamp(worker.last_declared_dead_at),
    }


def worker_named(worker_id: str) -> Worker:
    check_string(worker_id, "id")  # a NUL in the path would reach the database driver
    worker = Worker.objects.filter(id=worker_id).first()
    if worker is None:
        raise NotFound(f"worker {worker_id} not found", details={"resource_type": "worker", "resource_id": worker_id})
    return worker


class WorkerListView(AdminView):
    """§9.1: every known worker, dead ones too until the reaper prunes them (``RETENTION["dead_workers"]``)."""

    query = {"GET": PAGE_PARAMS}

    def get(self, request: Any) -> Response:
        page = page_of(request.query_params)
        now = db_now()
        rows, has_more = page.slice(Worker.objects.order_by("id"))
        held = held_counts([worker.id for worker in rows])
        every = Worker.objects.only("state", "last_heartbeat_at", "declared_dead_at")
        summary = Counter(shown_state(worker, now) for worker in every)
        return Response({
            "items": [render_worker(worker, now, held.get(worker.id, 0)) for worker in rows],
            "summary": {"total": sum(summary.values()), **{state: summary.get(state, 0) for state in SHOWN_STATES}},
            "pagination": page.meta(sum(summary.values()), has_more),
        })


class WorkerView(AdminView):
    """§9.2 detail (with the jobs it holds); §9.4 ``DELETE``: deregister a dead worker, its jobs back to their queues."""

    def get(self, request: Any, worker_id: str) -> Response:
        worker = worker_named(worker_id)
        jobs = list(listed(Job.objects.filter(state=JobState.ACTIVE, worker_id=worker.id).order_by("seq"))[:HELD_SHOWN])
        body = render_worker(worker, db_now(), len(jobs))
        body["jobs"] = [render_listed(row) for row in jobs]
        return Response(body)

    def delete(self, request: Any, worker_id: str) -> Response:
        worker = worker_named(worker_id)
        if shown_state(worker, db_now()) != DEAD:
            raise _refused(worker, f"worker {worker.id} is alive (its last heartbeat is within "
                                   f"{ojs_settings.HEARTBEAT_TIMEOUT} s): only a dead worker is deregistered")
        held = held_counts([worker.id]).get(worker.id, 0)
        workers.deregister(worker.id)
        return Response({"deregistered": True, "id": worker.id, "jobs_requeued": held})


class WorkerQuietView(AdminView):
    """§9.3: stop fetching, finish the jobs held; the worker hears it in its next heartbeat reply."""

    def post(self, request: Any, worker_id: str) -> Response:
        worker = worker_named(worker_id)
        now = db_now()
        if shown_state(worker, now) == DEAD:
            raise _refused(worker, f"worker {worker.id} is dead: it sends no heartbeat to hear a directive by")
        if WorkerState.TERMINATE in (worker.state, worker.directive):
            # ojs-worker-protocol §2.3: a worker never goes back from terminate.
            raise _refused(worker, f"worker {worker.id} is terminating")
        workers.set_directive([worker.id], WorkerState.QUIET)
        worker.refresh_from_db()
        return Response(render_worker(worker, now, held_counts([worker.id]).get(worker.id, 0)))


def _refused(worker: Worker, message: str) -> Conflict:
    return Conflict(message, details={"worker_id": worker.id, "reported_state": worker.state,
                                      "directive": worker.directive},
                    hint="details says what the worker last reported and what it was asked; "
                         "GET /ojs/v1/admin/workers/{id} for the rest.")
