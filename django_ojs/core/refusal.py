"""Why a move did not happen: the one explanation every path gives (404, or 409 naming the state or the lease)."""

from __future__ import annotations

from typing import Any

from ..models import Job
from ..protocol.errors import InvalidTransition, NotFound
from ..protocol.states import JobState, Move, sources

# The moves only the worker holding the job's lease makes.
HOLDER_MOVES = frozenset({Move.ACK, Move.FAIL, Move.SNOOZE, Move.WAIT})


def refusal(job: Job | None, job_id: Any, move: Move) -> Exception:
    """The error for a move that did not happen: missing job, wrong state, or not our lease."""
    if job is None:
        return NotFound(f"job {job_id} not found", details={"resource_type": "job", "resource_id": str(job_id)})
    # An active job that refused a move of its holder is held under another lease.
    if move in HOLDER_MOVES and job.state == JobState.ACTIVE:
        held_by = f"worker {job.worker_id!r}, attempt {job.attempt}"
        return InvalidTransition(
            f"job {job.id} is reserved by {held_by}; this {move.value} does not hold that reservation",
            job_id=str(job.id),
            current_state=job.state,
            details={"worker_id": job.worker_id, "attempt": job.attempt},
        )
    return InvalidTransition(
        f"cannot {move.value} job {job.id}: it is {job.state}",
        job_id=str(job.id),
        current_state=job.state,
        details={"expected_state": sorted(s.value for s in sources(move))},
    )
