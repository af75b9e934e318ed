"""POSIX signals (ojs-graceful-shutdown §4) and the PID 1 check (§4.3).

The handlers only record the signal and wake the loop; the loop applies it
(``Lifecycle.on_signal``), so no lock is ever taken inside a handler. One
exception: a third SIGTERM/SIGINT (the runtime counts them in its handler)
exits at once -- the escape hatch when even the forced stop hangs, e.g. on
an unreachable database.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType

logger = logging.getLogger("django_ojs.worker")

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGTSTP, signal.SIGCONT)
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "busybox"})


def install(on_signal: Callable[[int], None]) -> dict[int, object]:
    """Route the handled signals to ``on_signal``; return the previous handlers."""

    def handle(signum: int, frame: FrameType | None) -> None:
        on_signal(signum)

    previous: dict[int, object] = {}
    for signum in HANDLED:
        previous[signum] = signal.signal(signum, handle)
    return previous


def restore(previous: dict[int, object]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)  # type: ignore[arg-type]


def hard_exit(code: int = 1) -> None:
    os._exit(code)


def pid1_problem(pid: int, in_container: bool, pid1_command: str | None) -> bool:
    """True when a shell that does not forward signals is PID 1 above us (pure)."""
    return in_container and pid != 1 and (pid1_command or "") in SHELLS


def warn_if_signals_may_not_arrive() -> None:
    """Log a warning when a shell wrapper as PID 1 would swallow the orchestrator's SIGTERM."""
    in_container = Path("/.dockerenv").exists() or "KUBERNETES_SERVICE_HOST" in os.environ
    try:
        pid1_command = Path("/proc/1/comm").read_text().strip()
    except OSError:
        pid1_command = None
    if pid1_problem(os.getpid(), in_container, pid1_command):
        logger.warning(
            "PID 1 in this container is %r, which does not forward SIGTERM: the worker will be "
            "SIGKILLed without a graceful shutdown. Start it with the exec form, e.g. "
            'CMD ["python", "manage.py", "ojs_worker"], or with "exec" in the shell script.',
            pid1_command,
        )
