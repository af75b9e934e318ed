"""Enqueue from Python: the in-process door to PUSH (no HTTP hop).

Jobs are validated exactly as the HTTP binding validates them
(``envelope.parse_job``), take their handler's defaults (``@job(...,
queue=...)``), pass the enqueue middleware chain, and are stored by the
core's ``push``/``push_many``.

Transactional enqueue: the core's push runs in ``transaction.atomic()``,
which inside a caller's own ``atomic()`` block is a savepoint. So a job
enqueued there is committed with the caller's rows, or rolled back with
them -- a job can never run for an order that was not saved, and no outbox
table is needed. On PostgreSQL the "new work" notification is delivered at
commit too, so a worker never wakes up for a job it cannot see yet.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction

from .core.job_columns import new_ids
from .core.push import push, push_many
from .handlers.middleware import compose_enqueue, enqueue_chain
from .handlers.options import Defaults, job_body, wire_args
from .handlers.registry import registry
from .models import Job
from .observe.tracing import traced_push
from .protocol.envelope import JobSpec, with_args
from .protocol.errors import InvalidRequest

if TYPE_CHECKING:
    from .models import Job


# Called with the jobs each enqueue_many stored (None where middleware dropped
# one). django_ojs.testing's inline mode runs them here, in the caller's thread.
stored_observers: list[Callable[[list[Job | None]], None]] = []


def enqueue(job_type: str, args: Sequence[Any] = (), **options: Any) -> Job | None:
    """Store one job of ``job_type`` with ``args``; return it, or None if middleware dropped it.

    ``options`` are those of the envelope: ``queue``, ``priority``,
    ``timeout`` (seconds or ``timedelta``), ``visibility_timeout``,
    ``retry`` (a retry policy dict), ``scheduled_at`` / ``expires_at``
    (aware ``datetime`` or RFC 3339), ``meta``, ``tags``, ``unique``,
    ``rate_limit``, ``pending``, ``id``. Invalid input raises
    ``django_ojs.protocol.errors.InvalidRequest`` (or ``PolicyInvalid``) naming the field.

    Unique jobs: a duplicate under ``on_conflict: "reject"`` raises
    ``django_ojs.DuplicateJob`` (``existing_job_id``); under ``"ignore"`` the
    existing job is returned with ``job.deduplicated`` True (False on a job
    stored anew; ``job.replaced_job_id`` names a job it replaced). A bounded queue
    that is full raises ``django_ojs.QueueFull``.
    """
    return enqueue_many([{"type": job_type, "args": args, **options}])[0]


def enqueue_many(jobs: Iterable[Mapping[str, Any]]) -> list[Job | None]:
    """Store several jobs atomically: all of them or none.

    Each item is ``{"type": ..., "args": [...], **options}``. The result has
    one entry per item, in order: the stored job, or None where enqueue
    middleware dropped it (ojs-middleware §9.2 option A). An exception --
    invalid input, or raised by a middleware -- stores none of them.
    """
    defaults = Defaults.from_settings()
    specs = [_spec(item, index, defaults) for index, item in enumerate(jobs)]
    if not specs:
        return []
    # Fixed before the middleware run: they see it and may not change it (§3.5).
    unnamed = [spec for spec in specs if spec.id is None]
    for spec, job_id in zip(unnamed, new_ids(len(unnamed)), strict=True):
        spec.id, spec.id_made_here = job_id, True
    return traced_push(specs, lambda: _push(specs))


def _push(specs: list[JobSpec]) -> list[Job | None]:
    chain = enqueue_chain()
    chain.freeze()
    middlewares = list(chain)
    stored: list[Job | None]
    if not middlewares:
        stored = list(push_many(specs))
    else:
        # Each job passes the chain on its own and sees itself stored (call_next
        # returns the Job), so the jobs are pushed one by one, in one transaction.
        with transaction.atomic():
            stored = [
                compose_enqueue(middlewares, _store_unchanged_id(spec.id, push))(spec) for spec in specs
            ]
    for observer in stored_observers:
        observer(stored)
    return stored


def _spec(item: Mapping[str, Any], index: int, defaults: Defaults) -> JobSpec:
    """The item's spec: parsed, or copied with its args from the spec of an earlier job of the same
    kind (``_kind``), parsed with the same handler options and defaults (``_parsed``)."""
    if not isinstance(item, Mapping) or "type" not in item:
        raise InvalidRequest(f"jobs[{index}] must be a mapping with a 'type'", field=f"jobs[{index}]")
    options = dict(item)
    job_type = options.pop("type")
    args = options.pop("args", ())
    key = _kind(job_type, options)
    handler_options = registry.defaults(job_type)
    known = _parsed.get(key) if key is not None else None
    if known is not None and known[0] is handler_options and known[1] == defaults:
        return with_args(known[2], wire_args(args))
    spec = job_body(job_type, args, {**handler_options, **options}, defaults=defaults)
    if key is not None and spec.id is None and spec.unique is None:
        if len(_parsed) >= _PARSED_KINDS:
            _parsed.clear()
        _parsed[key] = (handler_options, defaults, spec)
        spec = with_args(spec, spec.args)  # the template stays as parsed
    return spec


# The specs parsed so far, one per kind of job (``_kind``), with the handler's options and the
# project's defaults they were parsed with: a later job of the kind is a copy with its own args,
# whether it comes in the same batch or in the next ``enqueue``. What ``parse_job`` decides
# depends on nothing else (no clock, no setting); a registered handler's options and the
# defaults are checked on every use, so a changed setting or handler parses anew.
_parsed: dict[Any, tuple[Mapping[str, Any], Defaults, JobSpec]] = {}
# Kinds kept at most: a process enqueues a few kinds of job; past this it starts over.
_PARSED_KINDS = 512


# Option values a batch's jobs may share a parse for: compared with their
# type, so that True and 1, or 1 and 1.0, which parse differently, differ
# (not datetimes: equal instants in two time zones are echoed as given).
_SIMPLE = (str, int, float, bool, type(None), dt.timedelta, uuid.UUID)


def _kind(job_type: Any, options: dict[str, Any]) -> Any:
    """What the parse of a job depends on besides its args, as a dict key; None with a compound option."""
    if not isinstance(job_type, str):
        return None
    for value in options.values():  # a loop, not all(generator): called per job of a batch
        if type(value) not in _SIMPLE:
            return None
    return (job_type, *((name, type(value), value) for name, value in options.items()))


def _store_unchanged_id(job_id: Any, store: Callable[[JobSpec], Job]) -> Callable[[JobSpec], Job]:
    def guarded(spec: JobSpec) -> Job:
        if spec.id != job_id:
            raise InvalidRequest(f"enqueue middleware changed the id of job {job_id}; ids are immutable")
        return store(spec)

    return guarded
