"""The worker's lifecycle state machine (ojs-worker-protocol §2, ojs-graceful-shutdown §4) (pure).

States move running <-> quiet -> terminate, never back from terminate.
Signals and heartbeat directives both land here, so the rules live in one
place:

- SIGTERM / SIGINT: begin the graceful shutdown; the same signal again while
  shutting down forces the stop (§4.2).
- SIGTSTP: quiet. SIGCONT: running again, ignored once terminating.
- Heartbeat directives: ``quiet`` and ``terminate`` are obeyed whenever the
  reply carries them (level-triggered: the operator's word wins over a local
  SIGCONT). ``running`` resumes a quiet worker only when the directive
  *changed* to running since the previous reply (edge-triggered): every
  reply carries a directive, and the default ``running`` must not undo a
  SIGTSTP the operator sent a second ago -- or when an operator set it
  again (its ``directive_set_at`` moved): the admin's Resume of a worker
  quieted by SIGTSTP, whose directive was ``running`` all along.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..protocol.states import WorkerState


class Change(Enum):
    """What a transition asks the runtime to do."""

    NONE = "none"
    QUIET = "quiet"
    RESUME = "resume"
    TERMINATE = "terminate"  # start the drain with its grace period
    FORCE = "force"  # stop draining now


@dataclass
class Lifecycle:
    state: WorkerState = WorkerState.RUNNING
    last_directive: WorkerState = WorkerState.RUNNING
    # When an operator last set the directive, as the last reply said (None: never).
    last_directive_set_at: Any = None
    forced: bool = False

    @property
    def fetching(self) -> bool:
        return self.state == WorkerState.RUNNING

    @property
    def terminating(self) -> bool:
        return self.state == WorkerState.TERMINATE

    def quiet(self) -> Change:
        if self.state != WorkerState.RUNNING:
            return Change.NONE
        self.state = WorkerState.QUIET
        return Change.QUIET

    def resume(self) -> Change:
        if self.state != WorkerState.QUIET:
            return Change.NONE
        self.state = WorkerState.RUNNING
        return Change.RESUME

    def terminate(self) -> Change:
        """A shutdown request: the first starts the drain, a repeat forces the stop."""
        if self.state == WorkerState.TERMINATE:
            if self.forced:
                return Change.NONE
            self.forced = True
            return Change.FORCE
        self.state = WorkerState.TERMINATE
        return Change.TERMINATE

    def on_signal(self, signum: int) -> Change:
        if signum in (signal.SIGTERM, signal.SIGINT):
            return self.terminate()
        if signum == signal.SIGTSTP:
            return self.quiet()
        if signum == signal.SIGCONT:
            return self.resume()
        return Change.NONE

    def on_directive(self, directive: WorkerState, set_at: Any = None) -> Change:
        """A heartbeat reply's ``directive``, set by an operator at ``set_at`` (None: never)."""
        previous, self.last_directive = self.last_directive, directive
        set_again = set_at is not None and set_at != self.last_directive_set_at
        if set_at is not None:
            self.last_directive_set_at = set_at
        if directive == WorkerState.TERMINATE:
            # A repeated terminate directive is not a second SIGTERM: no force.
            return self.terminate() if not self.terminating else Change.NONE
        if directive == WorkerState.QUIET:
            return self.quiet()
        if directive == WorkerState.RUNNING and (previous != WorkerState.RUNNING or set_again):
            return self.resume()
        return Change.NONE
