"""Wake the runtime's loop from other threads and from signal handlers.

A self-pipe rather than a ``threading.Event``: ``Event.set()`` takes a lock,
and a signal handler that runs while the main thread holds that same lock
deadlocks. ``os.write`` on a non-blocking pipe is safe anywhere. Only the
first wake-up after each wait writes, so a burst of completions costs one
system call.
"""

from __future__ import annotations

import contextlib
import os
import select


class Waker:
    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._pending = False

    def wake(self) -> None:
        if self._pending:
            return
        self._pending = True
        # Full pipe: a wake-up is already queued; closed: shutting down.
        with contextlib.suppress(OSError):  # BlockingIOError is an OSError
            os.write(self._write, b"\0")

    def wait(self, timeout: float) -> None:
        """Sleep until woken or ``timeout`` seconds pass.

        The caller must look at its inputs *after* this returns: the flag is
        cleared before returning, so a wake-up that raced with the wait is
        either seen here or writes again.
        """
        if not self._pending:
            select.select([self._read], [], [], max(timeout, 0.0))
        try:
            while os.read(self._read, 4096):
                pass
        except BlockingIOError:
            pass
        self._pending = False

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
