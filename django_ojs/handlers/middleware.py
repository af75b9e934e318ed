"""Enqueue and execution middleware chains (ojs-middleware).

A middleware is a callable:

- enqueue: ``middleware(job, call_next) -> Job | None`` where ``job`` is the
  validated ``JobSpec`` about to be stored and ``call_next(job)`` runs the
  rest of the chain and the store. Returning ``None`` without calling
  ``call_next`` drops the job silently (§7.2); raising aborts the enqueue
  (§7.1). Modifying ``job.id`` is refused (§3.5).
- execution: ``middleware(job, ctx, call_next) -> result`` where ``job`` is
  the claimed Job row, ``ctx`` its ``JobContext``, and ``call_next()`` runs
  the rest of the chain and the handler (§4.3, nested "onion" order).

``OJS["ENQUEUE_MIDDLEWARE"]`` and ``OJS["EXECUTION_MIDDLEWARE"]`` list dotted
paths, outermost first; a path naming a class is instantiated without
arguments. Code may also change the chains (``add``, ``prepend``,
``insert_before``, ``insert_after``, ``remove``; §5.1) in an
``AppConfig.ready``. Identity (§5.2): a middleware is found by the object
that was added, by its class, or by the dotted path it was loaded from. A
chain is frozen when first used -- the first enqueue, or the worker's start
-- and refuses changes after that (§5.3). Middleware instances are shared by
all the worker's threads and must be thread-safe (§11.2).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from ..conf import ojs_settings

Middleware = Callable[..., Any]

logger = logging.getLogger("django_ojs.worker")


class FrozenChain(RuntimeError):
    """A chain was changed after jobs started flowing through it."""


class Chain:
    """An ordered, inspectable list of middleware with the five §5.1 operations."""

    def __init__(self, name: str, entries: Iterable[tuple[str, Middleware]] = ()):
        self.name = name
        self._entries: list[tuple[str, Middleware]] = list(entries)
        self._frozen = False

    # -- inspection ---------------------------------------------------------
    def __iter__(self) -> Iterator[Middleware]:
        return iter([middleware for _, middleware in self._entries])

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """Each middleware's identity string, in order (§5.4)."""
        return [name for name, _ in self._entries]

    # -- management ---------------------------------------------------------
    def add(self, middleware: Middleware | str) -> None:
        self._check_open()
        self._entries.append(_entry(middleware))

    def prepend(self, middleware: Middleware | str) -> None:
        self._check_open()
        self._entries.insert(0, _entry(middleware))

    def insert_before(self, existing: Middleware | str, middleware: Middleware | str) -> None:
        self._check_open()
        self._entries.insert(self._index(existing), _entry(middleware))

    def insert_after(self, existing: Middleware | str, middleware: Middleware | str) -> None:
        self._check_open()
        self._entries.insert(self._index(existing) + 1, _entry(middleware))

    def remove(self, middleware: Middleware | str) -> None:
        self._check_open()
        del self._entries[self._index(middleware)]

    def freeze(self) -> None:
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    def _check_open(self) -> None:
        if self._frozen:
            raise FrozenChain(f"the {self.name} middleware chain is in use and can no longer change")

    def _index(self, ref: Middleware | str) -> int:
        for index, (name, middleware) in enumerate(self._entries):
            if _matches(ref, name, middleware):
                return index
        raise ValueError(f"{_describe(ref)} is not in the {self.name} middleware chain")


def _matches(ref: Middleware | str, name: str, middleware: Middleware) -> bool:
    if isinstance(ref, str):
        return ref == name
    return ref is middleware or (isinstance(ref, type) and type(middleware) is ref)


def _describe(ref: Any) -> str:
    return ref if isinstance(ref, str) else getattr(ref, "__qualname__", type(ref).__qualname__)


def _entry(middleware: Middleware | str) -> tuple[str, Middleware]:
    """Resolve a dotted path or an object to ``(identity, callable)``."""
    if isinstance(middleware, str):
        try:
            target = import_string(middleware)
        except ImportError as exc:
            raise ImproperlyConfigured(f"cannot import middleware {middleware!r}: {exc}") from exc
        name = middleware
    else:
        target = middleware
        # A function or a class names itself; an instance is named by its class.
        source = target if isinstance(target, type) or hasattr(target, "__qualname__") else type(target)
        name = f"{source.__module__}.{source.__qualname__}"
    if isinstance(target, type):
        target = target()
    if not callable(target):
        raise ImproperlyConfigured(f"middleware {name} is not callable")
    return name, target


def chain_from_paths(name: str, paths: Iterable[str]) -> Chain:
    return Chain(name, [_entry(path) for path in paths])


# -- composition -----------------------------------------------------------


def compose_enqueue(middlewares: list[Middleware], store: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``A(B(C(store)))`` for one job: each middleware gets ``(job, call_next)``."""
    call = store
    for middleware in reversed(middlewares):
        call = _enqueue_step(middleware, call)
    return call


def _enqueue_step(middleware: Middleware, call_next: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def step(job: Any) -> Any:
        return middleware(job, call_next)

    return step


def run_execution(middlewares: list[Middleware], job: Any, ctx: Any, handler: Callable[[], Any]) -> Any:
    """Run ``handler`` inside the execution chain, first middleware outermost.

    ``call_next`` may be called once; a second call raises (§4.3 asks
    implementations to guard against it).
    """
    if not middlewares:
        return handler()
    return _nested(middlewares, 0, job, ctx, handler)


def _nested(middlewares: list[Middleware], index: int, job: Any, ctx: Any, handler: Callable[[], Any]) -> Any:
    if index == len(middlewares):
        return handler()
    called = False

    def call_next() -> Any:
        nonlocal called
        if called:
            raise RuntimeError(f"middleware {_describe(middlewares[index])} called call_next() twice")
        called = True
        return _nested(middlewares, index + 1, job, ctx, handler)

    return middlewares[index](job, ctx, call_next)


# -- the configured chains ----------------------------------------------------

_chains: dict[str, Chain] = {}
_chains_lock = threading.Lock()


def enqueue_chain() -> Chain:
    """The project's enqueue chain, loaded from ``OJS["ENQUEUE_MIDDLEWARE"]`` on first use."""
    return _configured("enqueue", "ENQUEUE_MIDDLEWARE")


def execution_chain() -> Chain:
    """The project's execution chain, loaded from ``OJS["EXECUTION_MIDDLEWARE"]`` on first use."""
    return _configured("execution", "EXECUTION_MIDDLEWARE")


def _configured(name: str, setting: str) -> Chain:
    chain = _chains.get(name)
    if chain is None:
        with _chains_lock:
            chain = _chains.get(name)
            if chain is None:
                chain = _chains[name] = chain_from_paths(name, getattr(ojs_settings, setting))
    return chain


def reset_chains() -> None:
    """Forget the loaded chains (settings changed, e.g. in tests)."""
    with _chains_lock:
        _chains.clear()


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "OJS":
        reset_chains()


# -- built-in middleware (ojs-middleware §8.1.1) -------------------------------


class EnqueueLogging:
    """Log every enqueued or dropped job at INFO."""

    def __call__(self, job: Any, call_next: Callable[[Any], Any]) -> Any:
        stored = call_next(job)
        if stored is None:
            logger.info("job %s (%s) dropped by enqueue middleware", job.id, job.type)
        else:
            logger.info("enqueued job %s (%s) on queue %s", stored.id, stored.type, stored.queue)
        return stored


class ExecutionLogging:
    """Log each execution's start, outcome and duration at INFO."""

    def __call__(self, job: Any, ctx: Any, call_next: Callable[[], Any]) -> Any:
        logger.info("job %s (%s) attempt %d started", job.id, job.type, ctx.attempt)
        started = time.monotonic()
        try:
            result = call_next()
        except BaseException as exc:
            logger.info(
                "job %s (%s) failed after %.0f ms: %s: %s",
                job.id, job.type, (time.monotonic() - started) * 1000, type(exc).__name__, exc,
            )
            raise
        logger.info("job %s (%s) completed in %.0f ms", job.id, job.type, (time.monotonic() - started) * 1000)
        return result
