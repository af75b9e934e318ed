"""Job and worker states and the one transition table (pure).

Every state change in the core names a ``Move``; ``MOVES`` says which states
it may leave and where it lands. The core turns ``sources(move)`` into the
``WHERE state IN (...)`` guard of its conditional write, so the table below
is the whole state machine: a move from any other state is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class JobState(StrEnum):
    SCHEDULED = "scheduled"
    AVAILABLE = "available"
    PENDING = "pending"
    ACTIVE = "active"
    COMPLETED = "completed"
    RETRYABLE = "retryable"
    CANCELLED = "cancelled"
    DISCARDED = "discarded"


TERMINAL = frozenset({JobState.COMPLETED, JobState.CANCELLED, JobState.DISCARDED})
# States that wait for a worker or a timer: nothing has claimed them.
WAITING = frozenset({JobState.SCHEDULED, JobState.AVAILABLE, JobState.PENDING, JobState.RETRYABLE})


class Move(StrEnum):
    """A named state change; its value is the verb used in messages and events."""

    PROMOTE = "promote"  # timer: scheduled_at reached, or retry backoff elapsed
    ACTIVATE = "activate"  # external activation of a pending job
    CLAIM = "claim"  # FETCH
    ACK = "ack"
    RETRY = "retry"  # FAIL with attempts left
    FAIL = "fail"  # FAIL with attempts exhausted or a non-retryable error
    CANCEL = "cancel"
    REQUEUE = "requeue"  # visibility timeout, worker death, or an explicit release
    EXPIRE = "expire"  # expires_at passed before the job ran (ojs-core §5.2)
    DISCARD = "discard"  # an operator discards a waiting job
    RESURRECT = "resurrect"  # manual retry from the dead letter (discarded -> available)
    DEFER = "defer"  # a rate limit's on_limit "reschedule": available -> scheduled
    # This server's extension (docs/how-to/snooze-signals-timers.md): the handler puts
    # its job back for later, its attempt not charged -- for a time, or until a signal.
    SNOOZE = "snooze"
    WAIT = "wait"


@dataclass(frozen=True)
class Transition:
    sources: frozenset[JobState]
    target: JobState


S = JobState
MOVES: dict[Move, Transition] = {
    Move.PROMOTE: Transition(frozenset({S.SCHEDULED, S.RETRYABLE}), S.AVAILABLE),
    Move.ACTIVATE: Transition(frozenset({S.PENDING}), S.AVAILABLE),
    Move.CLAIM: Transition(frozenset({S.AVAILABLE}), S.ACTIVE),
    Move.ACK: Transition(frozenset({S.ACTIVE}), S.COMPLETED),
    Move.RETRY: Transition(frozenset({S.ACTIVE}), S.RETRYABLE),
    Move.FAIL: Transition(frozenset({S.ACTIVE}), S.DISCARDED),
    Move.CANCEL: Transition(
        frozenset({S.SCHEDULED, S.AVAILABLE, S.PENDING, S.RETRYABLE, S.ACTIVE}), S.CANCELLED
    ),
    Move.REQUEUE: Transition(frozenset({S.ACTIVE}), S.AVAILABLE),
    Move.EXPIRE: Transition(WAITING, S.DISCARDED),
    Move.DISCARD: Transition(WAITING, S.DISCARDED),
    Move.RESURRECT: Transition(frozenset({S.DISCARDED}), S.AVAILABLE),
    Move.DEFER: Transition(frozenset({S.AVAILABLE}), S.SCHEDULED),
    Move.SNOOZE: Transition(frozenset({S.ACTIVE}), S.SCHEDULED),
    Move.WAIT: Transition(frozenset({S.ACTIVE}), S.SCHEDULED),
}
del S

# Where PUSH may put a new job (ojs-core §6.3, "(initial)").
INITIAL_STATES = frozenset({JobState.SCHEDULED, JobState.AVAILABLE, JobState.PENDING})

# States in the order an operator reads them: waiting, running, finished.
STATE_ORDER = (
    JobState.AVAILABLE, JobState.ACTIVE, JobState.SCHEDULED, JobState.RETRYABLE, JobState.PENDING,
    JobState.COMPLETED, JobState.DISCARDED, JobState.CANCELLED,
)

# Every (from, to) pair the table allows; anything else is an invalid move.
ALLOWED_PAIRS: frozenset[tuple[JobState, JobState]] = frozenset(
    (source, transition.target) for transition in MOVES.values() for source in transition.sources
)


def sources(move: Move) -> frozenset[JobState]:
    return MOVES[move].sources


def target(move: Move) -> JobState:
    return MOVES[move].target


def can(move: Move, state: str | JobState) -> bool:
    return JobState(state) in MOVES[move].sources


def is_allowed(source: str | JobState, destination: str | JobState) -> bool:
    return (JobState(source), JobState(destination)) in ALLOWED_PAIRS


class WorkerState(StrEnum):
    """Worker lifecycle (ojs-worker-protocol §2); also the directives of BEAT."""

    RUNNING = "running"
    QUIET = "quiet"
    TERMINATE = "terminate"
