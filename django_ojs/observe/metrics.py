"""Prometheus metrics (ojs-observability §8), with ``OJS["METRICS"]`` on and the ``prometheus`` extra.

Two kinds, two sources:

- **Counters and histograms** are counted where things happen. The lifecycle
  counters (``ojs_job_enqueued_total``, ``_completed``, ``_failed`` = discarded,
  ``_retried``, ``_cancelled``, ``_expired``, ``ojs_reaper_recovered_total``)
  come from the committed events (``django_ojs.observe.signals.count_with``: after
  commit, like the signals, but told of the one-statement paths' events as
  (queue, type) pairs, with no event row read back), so they count committed
  moves only, in whichever process made them: web (PUSH, ACK over HTTP),
  worker, reaper. The histograms ``ojs_job_duration_seconds`` and
  ``ojs_job_queue_time_seconds`` are observed by the Python worker around
  each execution.
- **Gauges** about the whole store (``ojs_queue_depth``, the oldest available
  job's age, the estimated time to drain a queue -- the signals to autoscale
  workers on --, workers by state, busy jobs) are read at scrape time with the
  admin's counts and throughput: the live states' exact (one grouped statement over
  their partial indexes), the finished states' exact up to 1,000 per queue and state and
  the planner's estimate past that, never a full scan. ``ojs_dead_letter_jobs``
  counts the dead letter by queue, the same jobs as ``GET /ojs/v1/dead-letter/stats``
  (``core.stats.dead_letter_stats``: bounded by ``RETENTION["dead_letter_max_count"]``);
  plain discards are in ``ojs_queue_depth{state="discarded"}`` with the dead letters.

Several processes: ``prometheus_client``'s multiprocess mode. Point
``PROMETHEUS_MULTIPROC_DIR`` at one empty directory for every process of a
host (web and ``ojs_worker``, ``ojs_reaper``), emptied at each deploy; the
scrape endpoint sums the files. Without it, the endpoint shows the counters
of the process that answers only (fine for one process, wrong for several).
"""

from __future__ import annotations

import bisect
import collections
import os
import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from ..core import coverage, maintenance
from ..core.clock import db_now
from ..core.stats import dead_letter_stats, queue_figures, queues_with_available
from ..core.workers import DEAD, SHOWN_STATES, overrun_shown, recent_deaths, shown_state
from ..models import Queue, Worker
from ..protocol.states import JobState
from .signals import count_with, stop_counting

# ojs-observability §8.2 recommended buckets.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
QUEUE_TIME_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600)
# At most this many queues get gauges per scrape (labels stay bounded, §8.4).
MAX_QUEUES = 200

_LABELS = ("queue", "type")
ENQUEUED = Counter(
    "ojs_job_enqueued", "Jobs that became available for their first attempt (scheduled ones when due).", _LABELS
)
COMPLETED = Counter("ojs_job_completed", "Jobs that reached completed.", _LABELS)
FAILED = Counter("ojs_job_failed", "Jobs that reached discarded (their last attempt failed).", _LABELS)
RETRIED = Counter("ojs_job_retried", "Failed attempts that will be retried.", _LABELS)
CANCELLED = Counter("ojs_job_cancelled", "Jobs cancelled.", _LABELS)
EXPIRED = Counter("ojs_job_expired", "Jobs discarded because they expired.", _LABELS)
SNOOZED = Counter("ojs_job_snoozed", "Snoozes: a handler put its job back for later, no attempt spent.", _LABELS)
WAITING = Counter("ojs_job_waiting", "Jobs parked waiting for a signal or a timer.", _LABELS)
SIGNALLED = Counter("ojs_job_signalled", "Signals delivered to jobs.", _LABELS)
ATTEMPT_FAILED = Counter("ojs_job_attempt_failed", "Failed attempts, whatever followed.", _LABELS)
RECOVERED = Counter(
    "ojs_reaper_recovered", "Attempts the server took back: dead worker, lapsed lease, execution timeout.",
    ("queue", "reason"),
)
DURATION = Histogram(
    "ojs_job_duration_seconds", "Execution time of an attempt in the Python worker.",
    ("queue", "type", "state"), buckets=DURATION_BUCKETS,
)
STEPS_COMPLETED = Counter(
    "ojs_job_steps_completed", "Durable steps whose result was recorded (job.step_completed events).", _LABELS
)
# ojs-progress §10: checkpoints by size; bytes of compact JSON, up to the 16 KiB bound.
CHECKPOINT_SIZE_BUCKETS = (64, 256, 1024, 4096, 16384)
CHECKPOINT_SIZE = Histogram(
    "ojs_progress_checkpoint_size_bytes", "Size of the checkpoints stored with progress reports.",
    ("job_type",), buckets=CHECKPOINT_SIZE_BUCKETS,
)
# Each measured metric and what its labels are, each bounded as a counter's (``_label``).
_MEASURED = {"checkpoint_size_bytes": (CHECKPOINT_SIZE, ("type",))}
QUEUE_TIME = Histogram(
    "ojs_job_queue_time_seconds", "Time from enqueue to the start of the attempt.", _LABELS, buckets=QUEUE_TIME_BUCKETS,
)

# ojs-results §11.2 (ojs.result.retrieval.count): reads of a result over HTTP, by how they were
# made -- "poll" answered at once, "wait" held until the job ended or the wait did -- and how
# they ended: the job's terminal state, "timeout" (408), or the state it is still in (a poll).
RESULT_RETRIEVED = Counter(
    "ojs_result_retrieved", "Reads of a job's result over HTTP (GET /jobs/{id}/result).", ("method", "outcome"),
)

_BY_TYPE = {
    "job.enqueued": ENQUEUED, "job.completed": COMPLETED, "job.discarded": FAILED, "job.retrying": RETRIED,
    "job.cancelled": CANCELLED, "job.expired": EXPIRED, "job.failed": ATTEMPT_FAILED,
    "job.snoozed": SNOOZED, "job.waiting": WAITING, "job.signalled": SIGNALLED,
    "job.step_completed": STEPS_COMPLETED,
}
_RECOVERIES = {"worker_death", "visibility_timeout", "timeout"}


# Each metric's children by label values, as ``labels()`` returns them: that
# call validates and builds its key under a lock every time, twice per job or
# more. Bounded as the labels are (queues × types × states, each bounded below).
_children: dict[tuple[Any, ...], Any] = {}

# Queue names and job types are the clients' to choose: one key with the enqueue scope pushed
# 10,000 types in two seconds, and each became series in every counter, kept for the process's
# life (5.5 MB a scrape). A process labels at most this many of each; later ones count as OTHER.
MAX_LABEL_VALUES = 1000
OTHER = "_other"
_labelled: dict[str, set[str]] = {"queue": set(), "type": set()}
_labelled_lock = threading.Lock()


def _label(kind: str, value: str) -> str:
    """``value`` as the label of a queue or job type: itself, or ``OTHER`` past ``MAX_LABEL_VALUES``."""
    seen = _labelled[kind]
    if value in seen:
        return value
    with _labelled_lock:
        if len(seen) >= MAX_LABEL_VALUES:
            return OTHER
        seen.add(value)
    return value


def _child(metric: Any, *labels: str) -> Any:
    key = (metric, *labels)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*labels)
    return child


def count_event(event: Any) -> None:
    """One committed event, one increment."""
    counter = _BY_TYPE.get(event.type)
    if counter is None:
        return
    data = event.data or {}
    if counter is ENQUEUED and data.get("attempt"):
        return  # back in its queue for another attempt (retry, release, recovery): not a new job
    queue = _label("queue", event.queue or data.get("queue") or "")
    _child(counter, queue, _label("type", data.get("job_type", ""))).inc()
    if event.type == "job.failed":
        kind = (data.get("error") or {}).get("type")
        if kind in _RECOVERIES:
            _child(RECOVERED, queue, kind).inc()


class _Counting:
    """What ``signals.count_with`` is given: committed events, whole or as (queue, job type) pairs."""

    kinds = frozenset(_BY_TYPE)

    def count_events(self, events: list[Any]) -> None:
        for event in events:
            count_event(event)

    def count_moves(self, kind: str, pairs: list[tuple[str, str]]) -> None:
        """``kind`` events of new jobs or finished attempts (never ``job.failed``, which needs its error)."""
        counter = _BY_TYPE.get(kind)
        if counter is None:
            return
        # One increment per label pair, not per job: a worker turn completes many (a plain
        # dict: collections.Counter costs more to build than a turn's few pairs to count).
        tally: dict[tuple[str, str], int] = {}
        for pair in pairs:
            tally[pair] = tally.get(pair, 0) + 1
        for (queue, job_type), many in tally.items():
            _child(counter, _label("queue", queue), _label("type", job_type)).inc(many)


    def measure(self, name: str, labels: tuple[str, ...], amount: float) -> None:
        """A measurement committed in some transaction (a checkpoint's size)."""
        measured = _MEASURED.get(name)
        if measured is not None:
            metric, kinds = measured
            _child(metric, *(_label(kind, value) for kind, value in zip(kinds, labels, strict=True))).observe(amount)


COUNTING = _Counting()


# Executions observed in the worker's handler threads, written to the histograms
# by its loop at most once a second (``flush_observations``): a deque, safe to append to
# from any thread and to empty from another.
_observed: collections.deque[tuple[Any, float]] = collections.deque()


# (queue, type, state) -> that execution's duration child and queue-time child: one lookup per job.
_execution_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}


def observe_execution(job: Any, state: str, seconds: float) -> None:
    """One finished execution in the worker: its duration and how long it waited first.

    Held until the worker's loop calls ``flush_observations`` (once a second,
    and at exit): a histogram observation costs several locked writes to the
    multiprocess files, per observation; a turn's worth of them mostly fall in
    one bucket, and is written as one increment of that bucket and the sum.
    """
    key = (job.queue, job.type, state)
    children = _execution_children.get(key)
    if children is None:
        queue, job_type = _label("queue", job.queue), _label("type", job.type)
        children = _execution_children[key] = (_child(DURATION, queue, job_type, state),
                                               _child(QUEUE_TIME, queue, job_type))
    _observed.append((children[0], seconds))
    if job.attempt == 1 and job.started_at and job.enqueued_at:
        waited = (job.started_at - job.enqueued_at).total_seconds()
        _observed.append((children[1], waited if waited > 0.0 else 0.0))


def count_result_retrieved(method: str, outcome: str) -> None:
    """One read of a result: ``method`` poll or wait; ``outcome`` the job's state, or timeout."""
    _child(RESULT_RETRIEVED, method, outcome).inc()


def flush_observations() -> None:
    """Write the held observations: per histogram child, each bucket's count and the sum once."""
    if not _observed:
        return
    # Plain dicts keyed by (child, bucket) and child: a turn holds a few children at most.
    counts: dict[tuple[Any, int], int] = {}
    sums: dict[Any, float] = {}
    while True:
        try:
            child, amount = _observed.popleft()
        except IndexError:
            break
        bucket = (child, bisect.bisect_left(child._upper_bounds, amount))
        counts[bucket] = counts.get(bucket, 0) + 1
        sums[child] = sums.get(child, 0.0) + amount
    # What Histogram.observe does per observation (prometheus_client: the sum, then the
    # first bucket whose upper bound holds the amount; +Inf is the last), once per bucket.
    for child, total in sums.items():
        child._sum.inc(total)
    for (child, index), count in counts.items():
        child._buckets[index].inc(count)


class StoreCollector:
    """Gauges read from the database at scrape time, each query bounded."""

    def collect(self) -> Any:
        now = db_now()
        names, unreported = reported_queues()
        figures = queue_figures(names, now)
        counts = {(queue, state): tally for queue in names for state, tally in figures[queue].counts.items()}
        depth = GaugeMetricFamily("ojs_queue_depth", "Jobs per queue and state (finished states estimated past 1,000).",
                                  labels=["queue", "state"])
        busy = GaugeMetricFamily("ojs_workers_busy", "Jobs executing now, per queue.", labels=["queue"])
        for (queue, state), tally in counts.items():
            depth.add_metric([queue, state], tally.value)
            if state == JobState.ACTIVE.value:
                busy.add_metric([queue], tally.value)
        age = GaugeMetricFamily("ojs_queue_oldest_available_age_seconds",
                                "Age of the oldest available job per queue (0 when none waits).", labels=["queue"])
        drain = GaugeMetricFamily(
            "ojs_queue_drain_seconds",
            "Estimated seconds to finish the available jobs per queue at the recent rate of jobs finished "
            "(the last 5 minutes, or since the queue's first finish in them; 0 when none waits; no sample while "
            "jobs wait and none finished, or the queue is paused).",
            labels=["queue"],
        )
        paused = GaugeMetricFamily("ojs_queue_paused", "1 while the queue is paused (it hands out no job), else 0.",
                                   labels=["queue"])
        for queue in names:
            paused.add_metric([queue], 1 if figures[queue].paused else 0)
            age.add_metric([queue], figures[queue].oldest_available_age_seconds)
            seconds = figures[queue].estimated_drain_seconds
            if seconds is not None:
                drain.add_metric([queue], seconds)
        workers = GaugeMetricFamily(
            "ojs_workers", "Registered workers by state: running, quiet, draining, dead (as the admin says).",
            labels=["state"],
        )
        by_state = dict.fromkeys(SHOWN_STATES, 0)
        overrun = GaugeMetricFamily(
            "ojs_handlers_overrun",
            "Worker slots held by handlers still running though their job timed out or was cancelled (live workers).",
        )
        held_past_end = 0
        for worker in Worker.objects.only("state", "last_heartbeat_at", "declared_dead_at", "overrun_handlers"):
            by_state[shown_state(worker, now)] += 1
            held_past_end += overrun_shown(worker, now)
        overrun.add_metric([], held_past_end)
        for state, value in by_state.items():
            workers.add_metric([state], value)
        active = GaugeMetricFamily("ojs_workers_active", "Workers alive: running, quiet or draining.")
        active.add_metric([], sum(v for k, v in by_state.items() if k != DEAD))
        deaths = GaugeMetricFamily(
            "ojs_workers_declared_dead_last_hour",
            "Workers the reaper declared dead in the last hour, those that came back since included "
            "(as the admin overview counts them).",
        )
        deaths.add_metric([], recent_deaths(now).declared)
        unrunnable = GaugeMetricFamily(
            "ojs_jobs_unrunnable",
            "Available jobs per queue and type that no running worker of the queue has a handler for.",
            labels=["queue", "type"],
        )
        for item in coverage.unrunnable(now)[0]:
            unrunnable.add_metric([item.queue, item.type], item.count)
        dead_letter = GaugeMetricFamily(
            "ojs_dead_letter_jobs", "Jobs in the dead letter (kept as dead letters, not plain discards), per queue.",
            labels=["queue"],
        )
        for queue, count in sorted(dead_letter_stats()["by_queue"].items()):
            dead_letter.add_metric([queue], count)
        reapers = GaugeMetricFamily(
            "ojs_reapers_ticking",
            f"Reapers (manage.py ojs_reaper) that ticked in the last "
            f"{maintenance.TICKS_MISSED * maintenance.TICK_RECORD_INTERVAL:g} s. At 0 retries and scheduled jobs "
            "never come due, and lapsed leases and dead workers' jobs are not recovered.",
        )
        reapers.add_metric([], maintenance.reapers_ticking(now))
        left_out = GaugeMetricFamily(
            "ojs_queues_unreported",
            f"Queues given no per-queue gauge in this scrape: past {MAX_QUEUES}, those with no available job first.",
        )
        left_out.add_metric([], unreported)
        yield from (
            depth, busy, age, drain, paused, workers, active, deaths, unrunnable, dead_letter, reapers, left_out, overrun
        )


def reported_queues() -> tuple[list[str], int]:
    """The queues that get gauges (at most ``MAX_QUEUES``, by name) and how many are left out. Queues
    with available jobs come first, so an autoscaler's queue never loses its series to a crowd of idle
    ones named before it; then the others by name."""
    waiting = queues_with_available()
    others = list(Queue.objects.exclude(name__in=waiting).order_by("name").values_list("name", flat=True))
    everyone = waiting + others
    return sorted(everyone[:MAX_QUEUES]), max(len(everyone) - MAX_QUEUES, 0)


def exposition() -> bytes:
    """The text a scrape answers: this host's counters (all processes) and the store's gauges."""
    from prometheus_client import REGISTRY

    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        from prometheus_client import multiprocess

        counted = CollectorRegistry()
        multiprocess.MultiProcessCollector(counted, path=directory)
    else:
        counted = REGISTRY
    store = CollectorRegistry(auto_describe=False)
    store.register(StoreCollector())
    return generate_latest(counted) + generate_latest(store)


def enable() -> None:
    """Count every committed event from now on (AppConfig.ready, with METRICS on)."""
    count_with(COUNTING)


def disable() -> None:
    stop_counting(COUNTING)
