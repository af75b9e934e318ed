"""Lifecycle events (ojs-events) as Django signals, sent after commit.

Connect to one kind::

    from django_ojs.signals import job_completed

    @receiver(job_completed)
    def on_done(sender, event, **kwargs):
        print(event.job_id, event.data["duration_ms"])

or to every event with ``ojs_event``. ``sender`` is the ``Event`` model and
``event`` an ``Event`` instance (``type``, ``time``, ``job_id``, ``queue``,
``data``; saved unless ``OJS["EVENTS"]`` is off).

Each event is sent exactly once, in the process whose transaction recorded it
(web, worker, reaper), after that transaction commits; never for a
transaction or savepoint that rolled back. One transaction's events go out
in one ``on_commit`` callback, however many jobs it moved. With no receiver
connected the store does not even build them (``wanted()``).

Counters (``django_ojs/metrics.py``) are not receivers: they are told of
every committed event too, but the one-statement paths tell them only the
event's type and its jobs' (queue, type) pairs (``count_after_commit``), so
turning metrics on does not make those statements return and decode an
event row per job. With a receiver connected, counters count the events the
receivers get instead; each event is counted once either way.

Receivers run with ``send_robust``: an exception in one is logged, never
raised into the worker loop or the request that committed the move.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.dispatch import Signal

logger = logging.getLogger("django_ojs.signals")

# Every event, whatever its type.
ojs_event = Signal()

job_enqueued = Signal()
job_scheduled = Signal()
job_started = Signal()
job_completed = Signal()
job_failed = Signal()
job_retrying = Signal()
job_discarded = Signal()
job_cancelled = Signal()
job_expired = Signal()
job_progress = Signal()
# This server's extension (docs/how-to/snooze-signals-timers.md).
job_snoozed = Signal()
job_waiting = Signal()
job_signalled = Signal()
# A durable step's result was recorded (core/durable.py).
job_step_completed = Signal()
worker_started = Signal()
worker_stopped = Signal()
# worker.stopped with reason "dead": the reaper declared the worker dead.
worker_died = Signal()
queue_paused = Signal()
queue_resumed = Signal()
cron_triggered = Signal()
cron_skipped = Signal()

BY_TYPE: dict[str, Signal] = {
    "job.enqueued": job_enqueued,
    "job.scheduled": job_scheduled,
    "job.started": job_started,
    "job.completed": job_completed,
    "job.failed": job_failed,
    "job.retrying": job_retrying,
    "job.discarded": job_discarded,
    "job.cancelled": job_cancelled,
    "job.expired": job_expired,
    "job.progress": job_progress,
    "job.snoozed": job_snoozed,
    "job.waiting": job_waiting,
    "job.signalled": job_signalled,
    "job.step_completed": job_step_completed,
    "worker.started": worker_started,
    "worker.stopped": worker_stopped,
    "queue.paused": queue_paused,
    "queue.resumed": queue_resumed,
    "cron.triggered": cron_triggered,
    "cron.skipped": cron_skipped,
}
_ALL = (ojs_event, worker_died, *BY_TYPE.values())


def wanted() -> bool:
    """Is any receiver connected? A list check per signal: the hot path's whole cost when not."""
    return any(signal.receivers for signal in _ALL)


class EventCounter(Protocol):
    """What ``count_with`` takes: told of committed events, whole or as (queue, job type) pairs."""

    # The event types it counts: the others cost it nothing on the one-statement paths.
    kinds: frozenset[str]

    def count_events(self, events: list[Any]) -> None: ...

    def count_moves(self, kind: str, pairs: list[tuple[str, str]]) -> None: ...


class Measurer(Protocol):
    """A counter that also takes measurements (a histogram's observations), as ``measure_after_commit`` sends them."""

    def measure(self, name: str, labels: tuple[str, ...], amount: float) -> None: ...


_counters: list[EventCounter] = []


def count_with(counter: EventCounter) -> None:
    """Tell ``counter`` of every committed event from now on (once, however often called)."""
    if counter not in _counters:
        _counters.append(counter)


def stop_counting(counter: EventCounter) -> None:
    if counter in _counters:
        _counters.remove(counter)


def counting() -> bool:
    """Is a counter told of events (metrics on)?"""
    return bool(_counters)


def observed() -> bool:
    """Does anyone need the events themselves after commit: a receiver, or a counter?"""
    return bool(_counters) or wanted()


_event_models: list[Any] = []


def event_model() -> Any:
    """The ``Event`` model, imported once (not at module import: the app registry must be ready)."""
    if not _event_models:
        # Projects import this module (django_ojs.signals) to connect receivers,
        # maybe before the app registry is ready: the model is read at first use.
        from ..models import Event

        _event_models.append(Event)
    return _event_models[0]


def send(events: Iterable[Any]) -> None:
    """Send these events now (they are committed), and count them."""
    Event = event_model()
    events = list(events)
    for event in events:
        results = ojs_event.send_robust(Event, event=event)
        specific = BY_TYPE.get(event.type)
        if specific is not None and specific.receivers:
            results += specific.send_robust(Event, event=event)
        if event.type == "worker.stopped" and (event.data or {}).get("reason") == "dead":
            results += worker_died.send_robust(Event, event=event)
        for receiver, result in results:
            if isinstance(result, Exception):
                logger.error("OJS signal receiver %r failed on %s", receiver, event.type, exc_info=result)
    _tell("count_events", events)


def _tell(method: str, *args: Any) -> None:
    for counter in _counters:
        try:
            getattr(counter, method)(*args)
        except Exception:  # as robust as the receivers: never into the worker loop or the request
            logger.exception("OJS counter %r failed", counter)


class _Batch:
    """The events of one transaction (or savepoint), sent by one on_commit callback."""

    __slots__ = ("callback", "events", "measures", "moves", "sid")

    def __init__(self, sid: str | None):
        self.sid = sid
        self.events: list[Any] = []
        self.moves: list[tuple[str, list[tuple[str, str]]]] = []
        self.measures: list[tuple[str, tuple[str, ...], float]] = []
        self.callback = self._send  # one bound method, so it can be found again

    def _send(self) -> None:
        batch, self.events = self.events, []
        moves, self.moves = self.moves, []
        measures, self.measures = self.measures, []
        if batch:
            send(batch)
        for kind, pairs in moves:
            _tell("count_moves", kind, pairs)
        for measurement in measures:
            _measure(*measurement)

    def registered(self, connection: Any) -> bool:
        # Django drops the callbacks of a rolled-back transaction or savepoint
        # (and runs then forgets them at commit): then this batch is over.
        return any(entry[1] is self.callback for entry in connection.run_on_commit)


def after_commit(events: list[Any], using: str = DEFAULT_DB_ALIAS) -> None:
    """Send ``events`` once the current transaction commits (at once outside one)."""
    if not events:
        return
    batch = _batch(using)
    if batch is None:
        send(events)
    else:
        batch.events.extend(events)


def count_after_commit(kind: str, pairs: list[tuple[str, str]], using: str = DEFAULT_DB_ALIAS) -> None:
    """Tell the counters, once the current transaction commits, of a ``kind`` event per (queue, job type) pair.

    For the one-statement paths with no receiver connected: they know their
    jobs' queues and types without reading the events back.
    """
    if not pairs or not any(kind in counter.kinds for counter in _counters):
        return
    batch = _batch(using)
    if batch is None:
        _tell("count_moves", kind, pairs)
    else:
        batch.moves.append((kind, pairs))


def measure_after_commit(name: str, labels: tuple[str, ...], amount: float, using: str = DEFAULT_DB_ALIAS) -> None:
    """Tell the counters that take measurements of ``amount`` once the current transaction commits
    (a checkpoint's size: observed only if it was stored)."""
    if not any(hasattr(counter, "measure") for counter in _counters):
        return
    batch = _batch(using)
    if batch is None:
        _measure(name, labels, amount)
    else:
        batch.measures.append((name, labels, amount))


def _measure(name: str, labels: tuple[str, ...], amount: float) -> None:
    for counter in _counters:
        if hasattr(counter, "measure"):
            try:
                cast(Measurer, counter).measure(name, labels, amount)
            except Exception:  # as robust as the receivers: never into the worker loop or the request
                logger.exception("OJS counter %r failed", counter)


def _batch(using: str) -> _Batch | None:
    """The current transaction's (or savepoint's) batch, registered with on_commit; None outside one."""
    connection = connections[using]
    if not connection.in_atomic_block:
        return None
    # Batched per innermost savepoint: events recorded inside a savepoint that
    # rolls back go with its callback, the outer transaction's stay.
    sids = [sid for sid in connection.savepoint_ids if sid]
    sid = sids[-1] if sids else None
    batch = getattr(connection, "_ojs_signal_batch", None)
    if batch is None or batch.sid != sid or not batch.registered(connection):
        batch = _Batch(sid)
        connection._ojs_signal_batch = batch  # type: ignore[attr-defined]  # one batch per connection, kept on it
        connection.on_commit(batch.callback, robust=True)
    return batch
