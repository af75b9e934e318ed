"""What the operators' and producers' moves write.

Shared by the one-job moves (``core/control.py``), the bulk moves
(``core/bulk.py``) and a workflow's cancel (``core/workflows.py``), so each
move writes the same columns wherever it starts.
"""

from __future__ import annotations

from typing import Any

from ..models import Job
from ..protocol.states import Move, sources, target
from . import events


def cancel_changes(now: Any) -> dict[str, Any]:
    """The columns CANCEL writes (besides the state): the job is finished and holds nothing."""
    return {"finished_at": now, "lease_expires_at": None, "deadline_at": None, "run_at": None}


def resurrect_changes(now: Any) -> dict[str, Any]:
    """The columns a dead letter retry writes: fresh attempts, no current error or result."""
    return {
        "attempt": 0,
        "releases": 0,
        "enqueued_at": now,
        "started_at": None,
        "completed_at": None,
        "finished_at": None,
        "error": None,
        "result": None,
        "retry_delay_ms": None,
        "dead_letter": False,
    }


def discard_changes(now: Any) -> dict[str, Any]:
    return {"finished_at": now, "run_at": None}


def cancel_rows(jobs: list[Job], now: Any) -> int:
    """Cancel locked unfinished jobs in one UPDATE, each with its job.cancelled event.

    The caller advances their workflows, or is the workflow's own cancel.
    """
    if not jobs:
        return 0
    Job.objects.filter(seq__in=[job.seq for job in jobs], state__in=sources(Move.CANCEL)).update(
        state=target(Move.CANCEL), **cancel_changes(now)
    )
    cancelled = []
    for job in jobs:
        previous, job.state, job.finished_at = job.state, target(Move.CANCEL), now
        cancelled.append(events.job_event("job.cancelled", job, now, previous_state=previous))
    events.record(cancelled)
    return len(jobs)
