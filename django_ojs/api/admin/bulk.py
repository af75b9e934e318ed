"""Bulk moves by filter (ojs-admin-api §8): retry, cancel, delete; and what a queue's purge (§6.5) shares with them.

A move runs through ``core/bulk.py`` as the CLI's and the admin console's do:
batch by batch, each its own short transaction, rows locked with SKIP LOCKED
so that no worker waits on it and it waits on no worker. A request stops
between batches once ``TIME_BUDGET`` is spent and says so (``complete``:
false); the same request again goes on where the move left off, since moved
jobs no longer match it.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.response import Response

from ...core import bulk
from ...models import Job
from ...protocol.errors import NotFound
from .base import AdminView, confirmed
from .filters import filter_from_body

# Seconds a request spends moving jobs before it answers (a proxy's timeout is rarely under 30 s).
TIME_BUDGET = 10.0
# ojs-admin-api §8 action -> the core's move.
ACTIONS = {"retry": "retry", "cancel": "cancel", "delete": "delete"}
WHY = {
    bulk.BUSY: "held by another transaction right now (a worker settling it, another move, a migration copying it): run the move again",
    bulk.GONE: "deleted meanwhile",
    bulk.UNIQUE_HELD: "its unique key is held by a live job",
}


def run(selection: QuerySet, move: str) -> dict[str, Any]:
    """Move every job of ``selection`` the move may take, within the time budget; the report as §8 renders it."""
    report = bulk.bulk_move(selection, move, time_budget=TIME_BUDGET)
    ids = dict(Job.objects.filter(seq__in=[seq for seq, _ in report.skipped_rows]).values_list("seq", "id"))
    return {
        "action": move,
        "matched": report.moved + report.skipped_total,
        "succeeded": report.moved,
        "failed": report.skipped_total,
        "errors": [
            {"job_id": str(ids[seq]) if seq in ids else None, "error": WHY.get(reason, f"the job is {reason} now"),
             "reason": reason}
            for seq, reason in report.skipped_rows
        ],
        "skipped_by_reason": dict(report.skipped.most_common()),
        "batches": report.batches,
        "complete": not report.truncated,
    }


class BulkView(AdminView):
    """POST /admin/jobs/bulk/{retry,cancel,delete}: ``{"filter": {...}, "confirm": true}``."""

    def post(self, request: Any, action: str) -> Response:
        if action not in ACTIONS:
            raise NotFound(f"no bulk action {action!r}; the actions are {', '.join(ACTIONS)}",
                           details={"resource_type": "bulk_action", "resource_id": action})
        body = self.body()
        job_filter = filter_from_body(body)
        confirmed(body)
        reply = run(job_filter.selection(), ACTIONS[action])
        if action == "retry":
            reply["retried"] = reply["succeeded"]  # openapi's name for it
        return Response(reply)
