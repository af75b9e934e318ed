"""Handlers: the Python callables that run jobs of one OJS type.

``@django_ojs.job("email.send", queue="mail", retry={"max_attempts": 5})``
registers a function for a type; its options are the defaults that
``enqueue`` applies to jobs of that type (explicit options win). Handlers
live in ``<app>/jobs.py``; ``DjangoOJSConfig.ready`` imports every installed
app's ``jobs`` module, so registration happens at startup in every process
(web and worker alike).

A handler is called as ``handler(ctx, *args)``: the job context first
(``django_ojs.worker.context.JobContext``), then the job's ``args`` array
spread as positional arguments. Its return value is the job's result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..envelope import TYPE_PATTERN
from .options import job_body

Handler = Callable[..., Any]


@dataclass(frozen=True)
class JobHandler:
    """A registered handler: callable like the function it wraps, plus ``enqueue``."""

    type: str
    func: Handler
    options: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def enqueue(self, *args: Any, **options: Any) -> Any:
        """Enqueue a job of this type with ``args``; see ``django_ojs.enqueue``."""
        from .. import enqueue

        return enqueue(self.type, list(args), **options)

    @property
    def name(self) -> str:
        return f"{self.func.__module__}.{self.func.__qualname__}"


class HandlerRegistry:
    """Job type -> handler. Registration is thread-safe; lookups are plain dict reads."""

    def __init__(self) -> None:
        self._handlers: dict[str, JobHandler] = {}
        self._lock = threading.Lock()

    def register(self, job_type: str, func: Handler, options: Mapping[str, Any] | None = None) -> JobHandler:
        if not isinstance(job_type, str) or not TYPE_PATTERN.match(job_type):
            raise ImproperlyConfigured(
                f"job type {job_type!r} must be dot-separated lowercase segments like 'email.send'"
            )
        if not callable(func):
            raise ImproperlyConfigured(f"the handler of {job_type!r} must be callable")
        handler = JobHandler(job_type, func, dict(options or {}))
        # Invalid defaults fail at import time, not at the first enqueue.
        job_body(job_type, [], handler.options, where=f"options of handler {job_type!r}")
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

    def get(self, job_type: str) -> JobHandler | None:
        return self._handlers.get(job_type)

    def defaults(self, job_type: str) -> Mapping[str, Any]:
        handler = self._handlers.get(job_type)
        return handler.options if handler else {}

    def types(self) -> list[str]:
        return sorted(self._handlers)


registry = HandlerRegistry()


def job(job_type: str, **options: Any) -> Callable[[Handler], JobHandler]:
    """Register the decorated function as the handler of ``job_type``.

    ``options`` (queue, priority, retry, timeout, visibility_timeout, tags,
    meta, unique, expires_at, ...) become the defaults of ``enqueue`` for this
    type. The decorated name stays callable and gains ``.enqueue(*args, **options)``.
    """

    def decorate(func: Handler) -> JobHandler:
        return registry.register(job_type, func, options)

    return decorate
