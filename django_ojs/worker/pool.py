"""The threads that run handlers: exactly ``concurrency`` of them.

Python cannot kill a thread, so a handler that overruns its timeout keeps
its thread until it returns. The pool never grows to replace it: the runtime
counts that thread's slot as taken until the handler returns, so the worker
never runs more handlers at once than its concurrency (the honest slot
accounting ojs-worker-protocol §8.2 asks for). The threads are daemons: a
stuck handler cannot keep a shut-down worker from exiting.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("django_ojs.worker")


class ExecutorPool:
    def __init__(self, size: int, run: Callable[[Any], Any], on_done: Callable[[Any, Any], None]):
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._run = run
        self._on_done = on_done
        self._threads = [
            threading.Thread(target=self._work, name=f"ojs-executor-{index}", daemon=True) for index in range(size)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, item: Any) -> None:
        self._inbox.put(item)

    def stop(self) -> None:
        """Let idle threads end; busy ones end after their handler returns."""
        for _ in self._threads:
            self._inbox.put(None)

    def _work(self) -> None:
        while True:
            item = self._inbox.get()
            if item is None:
                return
            try:
                outcome = self._run(item)
            except BaseException:  # the runner turns handler errors into outcomes; this is a bug
                logger.exception("executor crashed while running a job")
                outcome = None
            self._on_done(item, outcome)
