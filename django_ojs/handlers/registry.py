"""Handlers: the Python callables that run jobs of one OJS type.

``@django_ojs.job("email.send", queue="email", retry={"max_attempts": 5})``
registers a function for a type; its options are the defaults that
``enqueue`` applies to jobs of that type (explicit options win). Handlers
live in ``<app>/jobs.py``; ``DjangoOJSConfig.ready`` imports every installed
app's ``jobs`` module, so registration happens at startup in every process
(web and worker alike).

A handler is called as ``handler(ctx, *args)``: the job context first
(``django_ojs.handlers.context.JobContext``), then the job's ``args`` array
spread as positional arguments. Its return value is the job's result.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections

from ..conf import ojs_settings
from ..protocol.cron_jobs import CodeScheduleError, CronSpec, schedule_from_setting
from ..protocol.envelope import TYPE_PATTERN
from .options import job_body
from .schedules import SCHEDULE_KEYWORDS, schedule_from_handler

# A type without a handler has no options: one read-only mapping, the same every time (the
# producer's parsed specs are kept while a type's options are the same object).
_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})

# close_old_connections in the thread where Django runs async code's ORM calls.
_check_connections = sync_to_async(close_old_connections, thread_sensitive=True)

if TYPE_CHECKING:
    from typing import Unpack

    from ..canvas import Signature
    from ..models import Job
    from .context import JobContext
    from .options import EnqueueOptions

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class JobHandler(Generic[P, R]):
    """A registered handler: callable like the function it wraps, plus ``enqueue``.

    Generic over the handler's parameters after ``ctx`` (``P``) and its result
    (``R``), so type checkers check ``send_email.enqueue(...)`` against
    ``send_email``'s own signature.
    """

    type: str
    func: Callable[Concatenate[JobContext, P], R]
    options: Mapping[str, Any] = field(default_factory=dict)
    # cron=, timezone=, ... of @job: a periodic schedule for this type (handlers/schedules.py).
    schedule: Mapping[str, Any] | None = None

    def __call__(self, ctx: JobContext, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(ctx, *args, **kwargs)

    @property
    def is_async(self) -> bool:
        """An ``async def`` handler: awaited on an event loop (``ojs_worker --async``) or run to completion."""
        return inspect.iscoroutinefunction(self.func)

    def invoke(self, ctx: Any, args: Sequence[Any]) -> Any:
        """Run the handler for one job in this thread; an ``async def`` one on an event loop of its own.

        An async handler runs through ``async_to_sync``, as Django runs async
        code from sync code: its ORM calls (``acount()``, ``sync_to_async``)
        then run in this thread, on this thread's connection -- the one the
        worker checks around each job, and in the test helpers the test's own,
        in its transaction. (With ``asyncio.run`` they would all go to
        asgiref's one shared thread: one connection for every handler thread
        of the process, their queries one at a time.)
        """
        # The job's args are the handler's positional parameters, unchecked here.
        func: Callable[..., Any] = self.func
        if self.is_async:
            return async_to_sync(func)(ctx, *args)
        return func(ctx, *args)

    async def run_async(self, ctx: Any, args: Sequence[Any]) -> Any:
        """Await an ``async def`` handler on a running event loop, checking the connections its ORM calls use.

        On a loop of its own (``ojs_worker --async``) Django runs an async
        caller's ORM calls (``acount()``, ``sync_to_async``) in asgiref's one
        shared thread, not in a thread the worker checks around each job: a
        connection the database dropped would fail every later async job of
        the process. Checking it before and after the job, in that thread,
        gives async handlers what Django gives a request (and the worker a
        sync handler): an obsolete or broken connection is closed, and
        ``CONN_HEALTH_CHECKS`` tests a kept one again before its next use.
        """
        func: Callable[..., Any] = self.func
        await _check_connections()
        try:
            return await func(ctx, *args)
        finally:
            await _check_connections()

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job | None:
        """Enqueue a job of this type with the handler's arguments; see ``django_ojs.enqueue``.

        Arguments may be given by keyword: they are placed at their position
        in the job's ``args`` (OJS args are positional). Job options go
        through ``using(...)``: ``send_email.using(queue="email").enqueue(...)``.
        Keywords that name no parameter of the handler are still taken as job
        options, as before ``using`` existed, but type checkers reject them.
        """
        return self.using().enqueue(*args, **kwargs)

    def using(self, **options: Unpack[EnqueueOptions]) -> BoundJob[P]:
        """These job options for the next ``enqueue`` (the handler's defaults fill the rest)."""
        return BoundJob(self, dict(options))

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """A signature of this handler: a job to place in a workflow (``django_ojs.canvas``).

        Its arguments are the handler's, checked as ``enqueue``'s are; job
        options go through ``using(...).s(...)`` or ``.s(...).set(...)``.
        """
        return self.using().s(*args, **kwargs)

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job | None:
        """``enqueue`` for async code (through ``sync_to_async``); see ``django_ojs.aenqueue``."""
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.enqueue)(*args, **kwargs)

    @property
    def name(self) -> str:
        return f"{self.func.__module__}.{self.func.__qualname__}"


@dataclass(frozen=True)
class BoundJob(Generic[P]):
    """``handler.using(**options)``: enqueues with those options, type-checked args."""

    handler: JobHandler[P, Any]
    options: Mapping[str, Any]

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job | None:
        from ..producer import enqueue  # the producer reads this registry for the handlers' defaults

        positional, extra_options = _positional_args(self.handler.func, args, kwargs)
        return enqueue(self.handler.type, positional, **{**extra_options, **self.options})

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job | None:
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.enqueue)(*args, **kwargs)

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """A signature with these options: ``handler.using(queue="slow").s(url)``."""
        from ..canvas import Signature  # canvas reads this registry for the handlers' defaults

        positional, extra_options = _positional_args(self.handler.func, args, kwargs)
        return Signature(self.handler.type, tuple(positional), {**extra_options, **self.options})


def _positional_args(
    func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The job's positional ``args`` for a call ``func(ctx, *args, **kwargs)``, and the leftover options.

    Keywords that name a parameter of ``func`` are bound to their position,
    filling skipped positions with their defaults; the others are returned
    as job options (the untyped spelling ``enqueue(*args, queue=...)``).
    A call that ``func`` could not accept raises ``TypeError`` here, at
    enqueue time, rather than as a failed job later.
    """
    if not kwargs:
        return list(args), {}
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # not introspectable (a builtin): keywords stay options
        return list(args), dict(kwargs)
    parameters = list(signature.parameters.values())[1:]  # after ctx
    bindable = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    by_name = {k: v for k, v in kwargs.items() if k in bindable}
    options = {k: v for k, v in kwargs.items() if k not in bindable}
    if not by_name:
        return list(args), options
    bound = signature.bind(None, *args, **by_name)
    if bound.kwargs:
        bound.apply_defaults()
    if bound.kwargs:
        names = ", ".join(sorted(bound.kwargs))
        raise TypeError(f"{func.__qualname__}: OJS args are positional; keyword-only parameters cannot be set ({names})")
    return list(bound.args[1:]), options


class HandlerRegistry:
    """Job type -> handler. Registration is thread-safe; lookups are plain dict reads."""

    def __init__(self) -> None:
        self._handlers: dict[str, JobHandler[..., Any]] = {}
        self._lock = threading.Lock()

    def register(
        self,
        job_type: str,
        func: Callable[Concatenate[JobContext, P], R],
        options: Mapping[str, Any] | None = None,
        schedule: Mapping[str, Any] | None = None,
    ) -> JobHandler[P, R]:
        if not isinstance(job_type, str) or not TYPE_PATTERN.fullmatch(job_type):
            raise ImproperlyConfigured(
                f"job type {job_type!r} must be dot-separated lowercase segments like 'email.send'"
            )
        if not callable(func):
            raise ImproperlyConfigured(f"the handler of {job_type!r} must be callable")
        handler = JobHandler(job_type, func, dict(options or {}), dict(schedule) if schedule else None)
        # Invalid defaults fail at import time, not at the first enqueue.
        job_body(job_type, [], handler.options, where=f"options of handler {job_type!r}")
        if handler.schedule is not None:
            try:
                schedule_from_handler(job_type, handler.schedule, handler.options)
            except CodeScheduleError as exc:
                raise ImproperlyConfigured(f"the schedule of handler {job_type!r}: {exc}") from None
        with self._lock:
            existing = self._handlers.get(job_type)
            if existing is not None and existing.name != handler.name:
                raise ImproperlyConfigured(
                    f"job type {job_type!r} already has the handler {existing.name}; "
                    f"{handler.name} cannot register it too"
                )
            self._handlers[job_type] = handler
        return handler

    def unregister(self, job_type: str) -> None:
        with self._lock:
            self._handlers.pop(job_type, None)

    def get(self, job_type: str) -> JobHandler[..., Any] | None:
        return self._handlers.get(job_type)

    def defaults(self, job_type: str) -> Mapping[str, Any]:
        handler = self._handlers.get(job_type)
        return handler.options if handler else _NO_OPTIONS

    def types(self) -> list[str]:
        return sorted(self._handlers)

    def schedules(self) -> list[Any]:
        """The periodic schedules the handlers declare (``@job(..., cron=...)``), as cron registrations."""
        return [
            schedule_from_handler(job_type, handler.schedule, handler.options)
            for job_type, handler in sorted(self._handlers.items()) if handler.schedule is not None
        ]

    def unserved(self, queues: Iterable[str], default_queue: str) -> dict[str, str]:
        """Job type -> default queue, for each handler whose jobs land where ``queues`` do not read.

        Jobs enqueued with their handler's defaults would sit ``available``
        with nobody to run them: the worker says so at start and
        ``manage.py check`` warns (W004).
        """
        read = set(queues)
        found = {}
        for job_type, handler in sorted(self._handlers.items()):
            queue = handler.options.get("queue") or default_queue
            if queue not in read:
                found[job_type] = queue
        return found


registry = HandlerRegistry()


def job(
    job_type: str, **options: Any
) -> Callable[[Callable[Concatenate[JobContext, P], R]], JobHandler[P, R]]:
    """Register the decorated function as the handler of ``job_type``.

    ``options`` (queue, priority, retry, timeout, visibility_timeout, tags,
    meta, unique, expires_at, ...) become the defaults of ``enqueue`` for this
    type. ``cron="0 * * * *"`` (with ``timezone``, ``cron_args``,
    ``cron_name``, ``overlap_policy``, ``description``) also declares a
    periodic schedule that the reaper syncs into the store at start. The
    decorated name stays callable and gains ``.enqueue(*args)`` (checked
    against the function's signature by type checkers), ``.aenqueue(*args)``
    and ``.using(**options).enqueue(*args)``.
    """
    schedule = {name: options.pop(name) for name in SCHEDULE_KEYWORDS if name in options}
    if schedule and "cron" not in schedule:
        raise ImproperlyConfigured(f"@job({job_type!r}): {', '.join(schedule)} need cron=")

    def decorate(func: Callable[Concatenate[JobContext, P], R]) -> JobHandler[P, R]:
        return registry.register(job_type, func, options, schedule or None)

    return decorate


def declared_schedules() -> list[CronSpec]:
    """Every schedule the code declares: the handlers' and ``OJS["CRON"]``. Names must be unique."""
    specs = [*registry.schedules(), *(schedule_from_setting(item) for item in ojs_settings.CRON)]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise CodeScheduleError(f"two schedules in code are named {spec.name!r}")
        seen.add(spec.name)
    return specs
