"""The async worker mode (``ojs_worker --async``): many handlers on one event loop.

``LoopPool`` replaces the executor threads of ``pool.py`` with one thread
running an asyncio event loop; each job is a task on it. Everything else --
slots, FETCH, heartbeats, timeouts, shutdown -- stays in the runtime's main
loop, unchanged: the runtime's table still holds one slot per held job and
per running handler, and FETCH still asks for exactly the free slots.

What differs is that a task *can* be stopped. When the runtime gives a job
up (its timeout, a cancellation or recovery from a heartbeat reply, the end
of the shutdown grace period) it calls ``ctx.cancel``, and the task is
cancelled there: the handler sees ``asyncio.CancelledError`` at its next
``await``, and the slot is free as soon as it has unwound -- not, as with a
thread, whenever the handler returns by itself.

How a job runs (``AsyncRunner``):

- an ``async def`` handler is awaited on the loop (its ORM calls run in
  asgiref's thread, whose connections are checked around it as a thread's are);
- a plain handler runs in a thread (``HandlerThreads``: up to one per slot,
  daemons), so it cannot block the loop; its slot is freed when it returns,
  as in the threaded mode;
- with execution middleware (which is synchronous: ``call_next()`` returns the
  result), the chain runs in a thread and the handler's coroutine on the loop,
  the thread waiting for it. Without middleware, the default, a running
  ``async def`` handler costs no thread at all.

Every thread checks its database connections around each call, as Django
does around a request: the handler threads, and the loop's default executor,
in which the runner's writes (a snooze, a held-back progress report) and
``asyncio.to_thread`` in handlers run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.db import close_old_connections, reset_queries

from ..handlers.context import Snooze
from ..handlers.middleware import Middleware, run_execution
from ..handlers.registry import HandlerRegistry, JobHandler
from ..protocol.failure import Failure
from . import failures
from .execution import Execution, Observed, Outcome, ended_by
from .pool import HandlerThreads

logger = logging.getLogger("django_ojs.worker")

# How long stop() lets cancelled tasks unwind before the loop closes.
STOP_WAIT = 5.0


class AsyncRunner:
    """Runs one execution as a coroutine and returns its ``Outcome``; never raises."""

    def __init__(
        self, registry: HandlerRegistry, middlewares: Sequence[Middleware], *, omit_backtraces: bool, concurrency: int
    ):
        self.registry = registry
        self.middlewares = list(middlewares)
        self.omit_backtraces = omit_backtraces
        self.observed = Observed()
        # One per slot at most: a job runs its plain handler, or its middleware chain, in one.
        self.threads = HandlerThreads(concurrency)

    async def __call__(self, execution: Execution) -> Outcome:
        try:
            if self.observed.off:
                return await self._run(execution)
            with self.observed.around(execution) as done:
                return done(await self._run(execution))
        finally:
            if execution.ctx.progress_pending:
                # The last report a throttled ctx.progress() held back; a write, so not on the loop.
                await asyncio.to_thread(execution.ctx.flush_progress)

    async def _run(self, execution: Execution) -> Outcome:
        job, ctx = execution.job, execution.ctx
        handler = self.registry.get(job.type)
        if handler is None:
            return Outcome(failure=failures.no_handler(job.type, self.registry.types()))
        try:
            if self.middlewares:
                result = await self._in_thread(self._chain_in_thread, handler, execution, asyncio.get_running_loop())
            elif handler.is_async:
                result = await handler.run_async(ctx, job.args)
            else:
                result = await self._in_thread(handler.func, ctx, *job.args)
        except (asyncio.CancelledError, concurrent.futures.CancelledError):
            # The runtime gave the job up (it decided the outcome already); nothing to report.
            return Outcome(failure=Failure(type="cancelled", message=ctx.cancel_reason or "cancelled"))
        except BaseException as exc:  # a handler's SystemExit must not stop the loop either
            # A snooze is written to the store: in a thread, not on the loop.
            return await asyncio.to_thread(ended_by, ctx, exc, self.omit_backtraces)
        if isinstance(result, Snooze):
            return await asyncio.to_thread(ended_by, ctx, result, self.omit_backtraces)
        return Outcome.of_result(result)

    def _in_thread(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        """``fn(*args)`` in a handler thread, ``checked``, in this task's context (its trace
        span), as ``asyncio.to_thread`` would run it in the default executor."""
        context = contextvars.copy_context()
        return asyncio.get_running_loop().run_in_executor(self.threads, context.run, checked, fn, *args)

    def _chain_in_thread(self, handler: JobHandler, execution: Execution, loop: asyncio.AbstractEventLoop) -> Any:
        job, ctx = execution.job, execution.ctx

        def call_handler() -> Any:
            if not handler.is_async:
                return handler.func(ctx, *job.args)
            future = asyncio.run_coroutine_threadsafe(handler.run_async(ctx, job.args), loop)
            ctx.on_cancel(lambda reason: _ignore(future.cancel()))
            return future.result()

        return run_execution(self.middlewares, job, ctx, call_handler)


def _ignore(_: object) -> None:
    """A cancel callback returns nothing: drop the value of the call it makes."""


def checked(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn`` in this thread as the threaded runner runs a job: DEBUG's queries
    forgotten, the thread's connections checked before and after."""
    reset_queries()
    close_old_connections()
    try:
        return fn(*args)
    finally:
        close_old_connections()


class CheckedExecutor(concurrent.futures.ThreadPoolExecutor):
    """asyncio's default executor for the loop (``to_thread``), every call ``checked``.

    Its size stays asyncio's default: the calls are short writes, and each
    thread keeps a connection.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        return super().submit(checked, functools.partial(fn, *args, **kwargs))


class LoopPool:
    """The async counterpart of ``ExecutorPool``: same ``start``/``submit``/``stop``."""

    def __init__(self, runner: AsyncRunner, on_done: Callable[[Any, Any], None]):
        self._runner = runner
        self._on_done = on_done
        self._loop = asyncio.new_event_loop()
        self._loop.set_default_executor(CheckedExecutor(thread_name_prefix="ojs-loop-io"))
        self._thread = threading.Thread(target=self._run_loop, name="ojs-event-loop", daemon=True)
        self._tasks: set[asyncio.Task] = set()

    def start(self) -> None:
        self._thread.start()

    def submit(self, execution: Execution) -> None:
        self._loop.call_soon_threadsafe(self._start_task, execution)

    def stop(self) -> None:
        """Cancel what still runs, let it unwind briefly, then end the loop."""
        if not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        try:
            future.result(STOP_WAIT + 1)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            logger.warning("the event loop did not stop in time")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(STOP_WAIT)
        self._runner.threads.shutdown(wait=False)  # a handler that never returns keeps its daemon thread

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()
        self._loop.close()

    def _start_task(self, execution: Execution) -> None:
        task = self._loop.create_task(self._run(execution), name=f"ojs-job-{execution.job_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # ctx.cancel() runs in the runtime's thread: hand the cancellation to the loop.
        execution.ctx.on_cancel(lambda reason: _ignore(self._loop.call_soon_threadsafe(task.cancel)))

    async def _run(self, execution: Execution) -> None:
        try:
            outcome = await self._runner(execution)
        except asyncio.CancelledError:  # cancelled before the runner began: the runtime decided already
            outcome = Outcome(failure=Failure(type="cancelled", message=execution.ctx.cancel_reason or "cancelled"))
        except BaseException:  # the runner turns handler errors into outcomes; this is a bug
            logger.exception("the event loop crashed while running a job")
            outcome = None
        self._on_done(execution, outcome)

    async def _shutdown(self) -> None:
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_WAIT)
