"""The threads that run handlers: at most ``concurrency`` of them.

``ExecutorPool`` in the threaded mode; ``HandlerThreads`` under it, and in
the event-loop mode, where only plain handlers need a thread.

Python cannot kill a thread, so a handler that overruns its timeout keeps
its thread until it returns. The pool never grows to replace it: the runtime
counts that thread's slot as taken until the handler returns, so the worker
never runs more handlers at once than its concurrency (the honest slot
accounting ojs-worker-protocol §8.2 asks for). The threads are daemons: a
stuck handler cannot keep a shut-down worker from exiting.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("django_ojs.worker")


class ExecutorPool:
    """The threaded mode's pool: each execution runs in one of ``size`` handler threads, then
    ``on_done(execution, outcome)`` is called from that thread."""

    def __init__(self, size: int, run: Callable[[Any], Any], on_done: Callable[[Any, Any], None]):
        self._threads = HandlerThreads(size, "ojs-executor")
        self._run = run
        self._on_done = on_done

    def start(self) -> None:
        """Nothing to start: a thread starts when a job first needs one."""

    def submit(self, item: Any) -> None:
        self._threads.submit(self._work, item)

    def stop(self) -> None:
        """Let idle threads end; busy ones end after their handler returns."""
        self._threads.shutdown(wait=False)

    def _work(self, item: Any) -> None:
        try:
            outcome = self._run(item)
        except BaseException:  # the runner turns handler errors into outcomes; this is a bug
            logger.exception("executor crashed while running a job")
            outcome = None
        self._on_done(item, outcome)


class HandlerThreads(concurrent.futures.Executor):
    """Threads for handlers: at most ``size``, daemons, started as the work needs them.

    ``ExecutorPool`` runs every job in them; the event-loop mode (``aio.py``)
    only plain handlers, so an ``--async`` worker of 200 slots running only
    ``async def`` handlers starts none. As many as the slots, where asyncio's
    default executor would have the cores + 4, and daemons: a handler that
    never returns must not keep a stopped worker from exiting (the
    interpreter joins a ``ThreadPoolExecutor``'s threads at exit).
    """

    def __init__(self, size: int, name: str = "ojs-handler"):
        self._size = size
        self._name = name
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._inbox.put((future, fn, args, kwargs))
        if self._idle.acquire(blocking=False):
            return future  # an idle thread takes it
        with self._lock:
            if len(self._threads) < self._size:
                thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let idle threads end; busy ones end after their call returns. Never waits for them."""
        with self._lock:
            for _ in self._threads:
                self._inbox.put(None)

    def _work(self) -> None:
        while True:
            item = self._inbox.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # the caller's future carries it, as an executor's does
                    future.set_exception(exc)
            self._idle.release()
