"""The worker process: claim, run, complete, beat, and shut down without losing a job.

One loop in the main thread owns every decision; other threads only report
to it through queues and wake it (``Waker``):

- ``concurrency`` executor threads run handlers (``pool.py``);
- the heartbeat thread BEATs every interval and on demand (``heartbeat.py``);
- on PostgreSQL, the listener thread LISTENs for new work (``listener.py``);
- signal handlers record the signal (``signals.py``).

Each turn of the loop: apply signals and heartbeat replies, collect finished
handlers, fail executions past their timeout, write completed attempts in
one batch, then claim as many jobs as there are free slots in one FETCH.

Slots. The runtime's table of executions holds every job the worker holds
and every handler thread still running; its size is the number of slots
taken, and FETCH asks for ``concurrency - size`` jobs, never more. A job
stays in the table after its handler returns until its ACK or FAIL is
written, and a timed-out handler stays until its thread returns (Python
cannot kill a thread: its slot stays taken, its result is discarded).

Outcomes are written in batches (``core.turn.settle_and_fetch``: the
finished attempts, then the claim for the free slots, in one transaction)
within a short window (``OJS["ACK_FLUSH_WINDOW"]``, 20 ms) or sooner when
the batch is full or no handler is left running. A crash inside the window leaves the
job active in the store; the reaper recovers it (``worker_death``) and it
runs again: at least once, never lost.

Shutdown (ojs-graceful-shutdown §5): on SIGTERM/SIGINT or a ``terminate``
directive the worker stops fetching, announces itself with a heartbeat
(``quiet``, §5.1), and reports ``terminate`` in the heartbeats of the
drain (ojs-worker-protocol §7.2). It waits up to the grace period for its
jobs, logging how many are left every 5 s, then FAILs the rest with
``ShutdownError``. Those are released back to ``available`` at once, with
the error in their history and without spending an attempt: an
interruption is not the job's fault (as Sidekiq re-queues interrupted
jobs). It sends a final heartbeat (``terminate``), deregisters and exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from queue import Empty, SimpleQueue
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, close_old_connections, reset_queries
from django.utils import timezone
from uuid6 import uuid7

from ..conf import ojs_settings
from ..core import coverage, maintenance, settle, workers
from ..core.awaiting import listen_alias, pooled
from ..core.turn import settle_and_fetch
from ..core.types import BeatReply, HeldJob, Lease, LimitReport, Settlement, Verdict, WorkerInfo
from ..handlers.context import JobContext
from ..handlers.middleware import execution_chain
from ..handlers.registry import HandlerRegistry, registry
from ..models import Queue
from ..observe.outage import OutageWatch, retry_on_new_connection
from ..protocol.envelope import DJANGO_TASK_TYPE
from ..protocol.failure import Failure
from ..protocol.states import WorkerState
from . import failures, signals
from .aio import AsyncRunner, LoopPool
from .execution import Execution, Outcome, Runner
from .health import HealthServer
from .heartbeat import Heartbeat
from .lifecycle import Change, Lifecycle
from .listener import Listener
from .pool import ExecutorPool
from .waker import Waker

logger = logging.getLogger("django_ojs.worker")

DRAIN_LOG_EVERY = 5.0  # ojs-graceful-shutdown §5.2
DB_RETRY_DELAY = 1.0
# The longest the loop sleeps without looking around.
MAX_WAIT = 1.0
# With metrics on: how often the loop writes the histograms its handler threads observed.
# Each write locks and updates the multiprocess files; once a turn (every 20 ms under
# load) they took 1.2 % of a busy worker's GIL time (py-spy --gil). A scrape every few seconds sees no difference.
METRICS_FLUSH_INTERVAL = 1.0
# A handler that outlives its job (timed out, cancelled) keeps its thread and its slot: Python cannot
# stop a thread. While any does, the worker says so at once and then this often, since its own row
# shows no job held and "running" while it may run nothing.
OVERRUN_LOG_EVERY = 60.0
# A handler whose job ended counts as outliving it (in the log and in the heartbeat's overrun_handlers)
# only this long after: one that checks ctx.cancelled, or is cancelled as an asyncio task, is returning.
OVERRUN_GRACE = 5.0


@dataclass(frozen=True)
class WorkerConfig:
    queues: tuple[str, ...]
    concurrency: int
    labels: tuple[str, ...] = ()
    heartbeat_interval: float = 5.0
    grace_period: float = 30.0
    poll_interval: float = 0.5
    listen_poll_interval: float = 5.0
    ack_batch_size: int = 500
    ack_flush_window: float = 0.02
    omit_backtraces: bool = False
    health_host: str = "0.0.0.0"
    health_port: int | None = None
    # Run handlers as tasks on one event loop (worker/aio.py) instead of threads.
    async_mode: bool = False

    @classmethod
    def from_settings(cls, **overrides: Any) -> WorkerConfig:
        """Settings from ``OJS``; ``None`` overrides mean "not given"."""
        values: dict[str, Any] = {
            "queues": tuple(ojs_settings.WORKER_QUEUES),
            "concurrency": ojs_settings.WORKER_CONCURRENCY,
            "labels": tuple(ojs_settings.WORKER_LABELS),
            "heartbeat_interval": float(ojs_settings.HEARTBEAT_INTERVAL),
            "grace_period": float(ojs_settings.SHUTDOWN_GRACE_PERIOD),
            "poll_interval": float(ojs_settings.POLL_INTERVAL),
            "listen_poll_interval": float(ojs_settings.LISTEN_POLL_INTERVAL),
            "ack_batch_size": ojs_settings.ACK_BATCH_SIZE,
            "ack_flush_window": float(ojs_settings.ACK_FLUSH_WINDOW),
            "omit_backtraces": bool(ojs_settings.OMIT_BACKTRACES),
        }
        values.update({name: value for name, value in overrides.items() if value is not None})
        config = cls(**values)
        if config.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not config.queues:
            raise ValueError("a worker needs at least one queue")
        for name in ("heartbeat_interval", "poll_interval", "listen_poll_interval", "ack_flush_window"):
            if getattr(config, name) <= 0:
                raise ValueError(f"{name.replace('_', ' ')} must be more than 0 seconds")
        if config.grace_period < 0:
            raise ValueError("the grace period cannot be negative")
        if config.ack_batch_size < 1:
            raise ValueError("ACK_BATCH_SIZE must be at least 1")
        return config


@dataclass
class Stats:
    completed: int = 0
    failed: int = 0
    # Attempts given back uncharged (a shutdown, a handler gone since the claim): no failure of the job's.
    released: int = 0
    # Outcomes the store refused: the job was cancelled or recovered meanwhile.
    dropped: int = 0
    # Attempts whose handler snoozed or waits for a signal: the job is back in the store.
    parked: int = 0
    max_in_flight: int = 0


@dataclass
class _Drain:
    deadline: float
    next_log: float
    gave_up: bool = False


class Runtime:
    def __init__(self, config: WorkerConfig, *, handlers: HandlerRegistry = registry):
        self.config = config
        # Django logs every query only under DEBUG: then the loop forgets its own each turn.
        self._forget_queries = settings.DEBUG
        self.id = str(uuid7())
        self.lifecycle = Lifecycle()
        self.stats = Stats()
        self.handlers = handlers
        self._waker = Waker()
        self._signals: deque[int] = deque()
        self._stop_signals = 0
        self._replies: deque[BeatReply] = deque()
        self._finished: SimpleQueue[tuple[Execution, Outcome | None]] = SimpleQueue()
        # Every held job and every running handler thread: one slot each.
        self._table: dict[tuple[str, int], Execution] = {}
        self._table_lock = threading.Lock()
        self._undecided = 0  # held executions whose handler has not returned or been failed
        self._unwritten: list[Execution] = []
        self._oldest_unwritten = 0.0
        self._earliest_deadline: float | None = None
        self._more_work = True
        self._next_poll = 0.0
        self._retry_db_at = 0.0
        self._outage = OutageWatch("worker", logger)
        self._drain: _Drain | None = None
        self._heartbeat: Heartbeat | None = None
        self._listener: Listener | None = None
        self._health: HealthServer | None = None
        self._pool: ExecutorPool | LoopPool | None = None
        self._previous_signals: dict[int, object] = {}
        # With metrics on: writes the histograms the handler threads observed (METRICS_FLUSH_INTERVAL).
        self._flush_metrics: Any = None
        self._metrics_due = 0.0
        self._overrun_log_at = 0.0

    # -- the process --------------------------------------------------------------

    def run(self) -> int:
        """Run until shut down; return the exit status (0: every held job was handed back)."""
        if not self._start():
            return 0
        try:
            while not self._finished_draining():
                self._turn()
        finally:
            status = self._stop()
        return status

    def _start(self) -> bool:
        """Register and start every part; False: told to stop before it could register."""
        chain = execution_chain()
        chain.freeze()
        # The handlers first: a SIGTERM that arrives while the worker registers (or waits for
        # the database to register) is then a graceful stop, never death by the signal.
        self._previous_signals = signals.install(self._on_signal)
        signals.warn_if_signals_may_not_arrive()
        registered = self._register(
            WorkerInfo(
                hostname=socket.gethostname(),
                pid=os.getpid(),
                queues=list(self.config.queues),
                concurrency=self.config.concurrency,
                labels=list(self.config.labels),
                started_at=timezone.now(),
                handles=self.handlers.types(),
            ),
        )
        if not registered:
            signals.restore(self._previous_signals)
            self._waker.close()
            logger.info("worker %s stopped before it could register: it held nothing", self.id)
            return False
        if ojs_settings.METRICS:
            from ..observe.metrics import flush_observations  # the "prometheus" extra, only with metrics on

            self._flush_metrics = flush_observations
        middlewares, omit = list(chain), self.config.omit_backtraces
        if self.config.async_mode:
            loop_runner = AsyncRunner(self.handlers, middlewares, omit_backtraces=omit, concurrency=self.config.concurrency)
            self._pool = LoopPool(loop_runner, self._on_handler_done)
        else:
            runner = Runner(self.handlers, middlewares, omit_backtraces=omit)
            self._pool = ExecutorPool(self.config.concurrency, runner, self._on_handler_done)
        self._pool.start()
        self._heartbeat = Heartbeat(self.id, self.config.heartbeat_interval, self._beat_snapshot, self._on_reply)
        self._heartbeat.start()
        alias = listen_alias()
        if alias is not None:
            self._listener = Listener(self.config.queues, self._on_work_available, alias)
            self._listener.start()
        elif ojs_settings.LISTEN is True and pooled(DEFAULT_DB_ALIAS):
            logger.info("the default database goes through a transaction pooler (DISABLE_SERVER_SIDE_CURSORS): "
                        "no LISTEN there; polling every %s s (docs/how-to/pgbouncer.md)", ojs_settings.POLL_INTERVAL)
        if self.config.health_port is not None:
            self._health = HealthServer(self.config.health_host, self.config.health_port, lambda: self.lifecycle.state)
            self._health.start()
        logger.info(
            "worker %s started (pid %d): queues %s, concurrency %d%s, handlers: %s",
            self.id, os.getpid(), ", ".join(self.config.queues), self.config.concurrency,
            " on one event loop (async)" if self.config.async_mode else "",
            ", ".join(self.handlers.types()) or "none",
        )
        if not _has_work_to_claim(self.handlers.types()):
            logger.warning(
                "this worker has no handlers, so it claims no job: no module registered one with "
                "@django_ojs.job. django-ojs imports the jobs module of every installed app (<app>/jobs.py); "
                "handlers elsewhere register only if that module is imported (manage.py check names such "
                "modules, django_ojs.W009)",
            )
        unserved = self.handlers.unserved(self.config.queues, ojs_settings.DEFAULT_QUEUE)
        if unserved:
            logger.warning(
                "this worker reads queues %s, but these handlers' jobs go elsewhere by default: %s. "
                "Unless another worker reads those queues, such jobs stay available; start this one "
                "with --queue for each", ", ".join(self.config.queues),
                ", ".join(f"{job_type} -> {queue}" for job_type, queue in unserved.items()),
            )
        self._warn_of_waiting_types()
        self._warn_if_no_reaper()
        self._warn_of_paused_queues()
        return True

    def _warn_of_paused_queues(self) -> None:
        """One WARNING line when queues this worker reads are paused: it takes nothing from them until they
        are resumed, and a pause forgotten looks like a worker that does nothing."""
        try:
            paused = list(
                Queue.objects.filter(name__in=self.config.queues, paused=True)
                .order_by("name").values_list("name", "paused_at")
            )
        except DatabaseError as exc:
            logger.debug("could not look for paused queues: %s", exc)
            return
        if paused:
            logger.warning(
                "queues this worker reads are paused, so it takes no job from them until they are resumed: %s. "
                "Resume with manage.py ojs resume QUEUE, or on the admin's Queues page",
                ", ".join(name if since is None else f"{name} (since {since:%Y-%m-%d %H:%M:%S} UTC)"
                          for name, since in paused),
            )

    def _warn_if_no_reaper(self) -> None:
        """One WARNING line when no reaper ticks: a worker runs available jobs only, and the rest wait for
        one (the overview says it too, to whoever looks). A question, not a duty, like the line above."""
        try:
            ticking = maintenance.reapers_ticking()
        except DatabaseError as exc:
            logger.debug("could not look for a running reaper: %s", exc)
            return
        if not ticking:
            logger.warning(
                "no reaper has ticked in the last %g s: unless manage.py ojs_reaper runs somewhere, retries and "
                "scheduled jobs never come due, and the jobs of workers that die stay active",
                maintenance.TICKS_MISSED * maintenance.TICK_RECORD_INTERVAL,
            )

    def _warn_of_waiting_types(self) -> None:
        """One WARNING line when jobs wait on this worker's queues that it has no handler for:
        it leaves them, and they wait for a worker that has one (a rolling deploy's new type,
        a typo). A question, not a duty: a database error here does not stop the start."""
        handled = self.handlers.types()
        try:
            missing, _complete = coverage.uncovered({queue: handled for queue in self.config.queues})
        except DatabaseError as exc:
            logger.debug("could not look for waiting jobs of other types: %s", exc)
            return
        if missing:
            logger.warning(
                "jobs wait on this worker's queues that it has no handler for, and will not run them: %s. "
                "They wait for a worker that has the handler (manage.py ojs queues names them)",
                "; ".join(f"{item.count:,} of type {item.type} on {item.queue}" for item in missing),
            )

    def _register(self, info: WorkerInfo) -> bool:
        """Register, waiting for the database while it is unreachable; False if told to stop first.

        A SIGTERM or SIGINT during the wait ends it: the worker holds nothing yet.
        """
        while not self._stop_signals:
            try:
                workers.register(self.id, info)
            except DatabaseError as exc:
                if not self._outage.failed(exc):
                    raise
                close_old_connections()
                self._waker.wait(DB_RETRY_DELAY)  # the signal handler wakes it
            else:
                self._outage.succeeded()
                return True
        return False

    def _stop(self) -> int:
        signals.restore(self._previous_signals)
        if self._listener:
            self._listener.stop()
        if self._heartbeat:
            self._heartbeat.stop()
        if self._pool:
            self._pool.stop()
        if self._flush_metrics is not None:
            self._flush_metrics()
        held = self._held_jobs()
        clean = not held

        def say_goodbye() -> None:
            # ojs-graceful-shutdown §5.3: the final heartbeat says terminate.
            workers.beat(self.id, state=WorkerState.TERMINATE, held=held)
            workers.deregister(self.id)

        try:
            retry_on_new_connection(say_goodbye)
        except DatabaseError as exc:
            logger.error("could not deregister (%s); the reaper will recover this worker's jobs", exc)
            clean = False
        if self._health:
            self._health.stop()
        self._waker.close()
        logger.info(
            "worker %s stopped: %d completed, %d failed, %d released, %d parked, %d dropped, "
            "at most %d of %d slots in use",
            self.id, self.stats.completed, self.stats.failed, self.stats.released, self.stats.parked,
            self.stats.dropped, self.stats.max_in_flight, self.config.concurrency,
        )
        return 0 if clean else 1

    # -- one turn of the loop ---------------------------------------------------------

    def _turn(self) -> None:
        self._waker.wait(self._time_to_wait(time.monotonic()))
        if self._forget_queries:
            reset_queries()  # this loop's queries would fill Django's log of 9,000 for nothing
        self._apply_signals()
        self._apply_replies()
        self._collect_finished()
        now = time.monotonic()
        if self._earliest_deadline is not None and now >= self._earliest_deadline:
            self._enforce_timeouts(now)
        if self._drain is not None:
            self._drain_turn(now)
        if now >= self._overrun_log_at:
            self._report_overrun(now)
        batch = self._unwritten[: self.config.ack_batch_size] if self._unwritten and self._flush_due(now) else []
        free = self._free_slots() + self._freed_by(batch)
        fetch = self._fetch_due(now, free)
        if batch or fetch:
            self._write_and_claim(now, batch, free if fetch else 0)
        if self._flush_metrics is not None and now >= self._metrics_due:
            # An idle loop still turns every MAX_WAIT: nothing observed waits longer than both.
            self._flush_metrics()
            self._metrics_due = now + METRICS_FLUSH_INTERVAL

    def _time_to_wait(self, now: float) -> float:
        wakes = [now + MAX_WAIT]
        if self._unwritten:
            wakes.append(max(self._oldest_unwritten + self.config.ack_flush_window, self._retry_db_at))
        if self._earliest_deadline is not None:
            wakes.append(self._earliest_deadline)
        if self.lifecycle.fetching and self._free_slots() > 0:
            wakes.append(max(now if self._more_work else self._next_poll, self._retry_db_at))
        if self._drain is not None:
            wakes.extend([self._drain.deadline, self._drain.next_log])
        return min(wakes) - now

    # -- inputs from signals and other threads ----------------------------------------

    def _on_signal(self, signum: int) -> None:
        """Runs inside the signal handler: record and wake, nothing else.

        Counted here, not in the loop, so that the third SIGTERM/SIGINT exits
        even when the loop is stuck (e.g. on an unreachable database).
        """
        if signum in (signal.SIGTERM, signal.SIGINT):
            self._stop_signals += 1
            if self._stop_signals >= 3:
                signals.hard_exit(1)
        self._signals.append(signum)
        self._waker.wake()

    def _on_handler_done(self, execution: Execution, outcome: Outcome | None) -> None:
        self._finished.put((execution, outcome))
        self._waker.wake()

    def _on_reply(self, reply: BeatReply) -> None:
        self._replies.append(reply)
        self._waker.wake()

    def _on_work_available(self) -> None:
        self._more_work = True
        self._waker.wake()

    def _beat_snapshot(self) -> tuple[WorkerState, list[HeldJob], int]:
        return self.lifecycle.state, self._held_jobs(), len(self._overrun())

    def _overrun(self) -> list[Execution]:
        """Executions whose job ended (timed out, cancelled) ``OVERRUN_GRACE`` ago or more while their handler
        still runs: each holds a slot."""
        ended_before = time.monotonic() - OVERRUN_GRACE
        with self._table_lock:
            return [e for e in self._table.values() if e.released and not e.thread_done
                    and e.released_at is not None and e.released_at <= ended_before]

    def _held_jobs(self) -> list[HeldJob]:
        """The attempts this worker holds: every execution whose outcome is not yet written."""
        with self._table_lock:
            return [HeldJob(job_id, attempt) for (job_id, attempt), execution in self._table.items()
                    if not execution.released]

    def _apply_signals(self) -> None:
        while self._signals:
            signum = self._signals.popleft()
            name = signal.Signals(signum).name
            self._apply(self.lifecycle.on_signal(signum), name)

    def _apply_replies(self) -> None:
        while self._replies:
            reply = self._replies.popleft()
            if reply.revived:
                logger.warning(
                    "this worker had been declared dead (no heartbeat for over %ss: frozen, or cut off from "
                    "the database); the server recovered the jobs it held", ojs_settings.HEARTBEAT_TIMEOUT,
                )
            self._apply(self.lifecycle.on_directive(reply.directive, reply.directive_set_at),
                        f"the server's {reply.directive} directive")
            # The reply names attempts as the beat named them: a later attempt
            # of the same job, claimed since, is not touched (DESIGN invariant 12).
            for held in reply.jobs_cancelled:
                self._release_unfinished(held, "the job was cancelled")
            for held in reply.jobs_lost:
                self._release_unfinished(held, "the job is no longer reserved by this worker")

    def _apply(self, change: Change, cause: str) -> None:
        assert self._heartbeat is not None
        if change is Change.QUIET:
            logger.info("quiet (%s): no longer fetching; %d jobs running", cause, self._undecided)
            self._heartbeat.request()
        elif change is Change.RESUME:
            logger.info("running again (%s)", cause)
            self._more_work = True
            self._heartbeat.request()
        elif change is Change.TERMINATE:
            now = time.monotonic()
            self._drain = _Drain(deadline=now + self.config.grace_period, next_log=now + DRAIN_LOG_EVERY)
            logger.info(
                "shutting down (%s): no longer fetching; waiting up to %gs for %d running jobs",
                cause, self.config.grace_period, self._undecided,
            )
            # §5.1: tell the backend at once that no more jobs will be fetched.
            self._heartbeat.request(report=WorkerState.QUIET)
        elif change is Change.FORCE:
            logger.warning("%s again: forcing the stop; %d jobs still running", cause, self._undecided)

    # -- executions -----------------------------------------------------------------

    def _free_slots(self) -> int:
        return self.config.concurrency - len(self._table)

    @staticmethod
    def _freed_by(batch: list[Execution]) -> int:
        """The slots writing ``batch`` frees: its executions whose handler has returned.

        A timed-out handler still running keeps its slot after its failure is
        written (its thread cannot be killed).
        """
        return sum(1 for execution in batch if execution.thread_done)

    def _fetch_due(self, now: float, free: int) -> bool:
        """``free``: the slots free once this turn's writes commit (``_freed_by``)."""
        return (
            self.lifecycle.fetching
            and now >= self._retry_db_at
            and free > 0
            and (self._more_work or now >= self._next_poll)
        )

    def _write_and_claim(self, now: float, batch: list[Execution], count: int) -> None:
        """Write ``batch``'s outcomes and claim ``count`` new jobs (0: none), in one transaction.

        One commit per turn instead of two, including the turn that writes a
        full batch: the claim also asks for the slots that batch frees. That
        never exceeds the concurrency, because the claim commits only if the
        writes do: if the transaction fails nothing was written and nothing
        claimed. Nothing is applied in memory (released, dispatched) before
        the commit succeeds: the outcomes are written again next turn.
        """
        fetch = count > 0
        if fetch:
            # Cleared before the query: a notification that arrives during it sets it again.
            self._more_work = False
            listening = self._listener is not None and self._listener.healthy
            self._next_poll = now + (self.config.listen_poll_interval if listening else self.config.poll_interval)
        limited = LimitReport()
        try:
            # Only the types this worker has handlers for: a job of another type waits,
            # untouched, for a worker that can run it (a rolling deploy's new types).
            verdicts, jobs = settle_and_fetch(
                self.id, self._settlements(batch), self.config.queues, count, limit_report=limited,
                types=self.handlers.types(),
            )
        except DatabaseError as exc:
            self._database_failed("writing outcomes" if batch else "fetch", exc)
            self._more_work = self._more_work or fetch
            return
        self._outage.succeeded()
        self._outcomes_written(batch, verdicts)
        if limited.key is not None:
            # Jobs wait for a rate limit to reopen, and no notification will
            # say when it does: poll again then, not after the idle interval.
            self._next_poll = min(self._next_poll, now + limited.seconds_to_wait(self.config.poll_interval))
        if count and len(jobs) == count:
            self._more_work = True  # there may be more where these came from
        for job in jobs:
            self._dispatch(job, now)

    def _dispatch(self, job: Any, claimed_at: float) -> None:
        assert self._heartbeat is not None and self._pool is not None
        # Measured from before the claim, so the worker's deadline falls no
        # later than the store's (started_at + timeout).
        deadline = claimed_at + job.timeout.total_seconds() if job.timeout else None
        ctx = JobContext(job, self.id, self._heartbeat.beat_now, deadline)
        execution = Execution(job, ctx, Lease(worker_id=self.id, attempt=job.attempt), deadline)
        with self._table_lock:
            self._table[(execution.job_id, job.attempt)] = execution
            in_flight = len(self._table)
        self._undecided += 1
        if in_flight > self.stats.max_in_flight:
            self.stats.max_in_flight = in_flight
        if deadline is not None and (self._earliest_deadline is None or deadline < self._earliest_deadline):
            self._earliest_deadline = deadline
        self._pool.submit(execution)

    def _collect_finished(self) -> None:
        while True:
            try:
                execution, outcome = self._finished.get_nowait()
            except Empty:
                return
            execution.thread_done = True
            if outcome is not None and outcome.parked and not execution.released:
                self._parked(execution)
            elif execution.outcome is None and not execution.released:
                self._decide(execution, outcome or Outcome(failure=_runner_bug()))
            else:
                # Failed or released while the handler ran: its result is discarded.
                self._forget_if_done(execution)

    def _decide(self, execution: Execution, outcome: Outcome) -> None:
        execution.outcome = outcome
        self._undecided -= 1
        if not self._unwritten:
            self._oldest_unwritten = time.monotonic()
        self._unwritten.append(execution)

    def _enforce_timeouts(self, now: float) -> None:
        earliest = None
        for execution in list(self._table.values()):
            if execution.outcome is not None or execution.released or execution.deadline is None:
                continue
            if execution.deadline <= now:
                limit = execution.job.timeout.total_seconds()
                execution.ctx.cancel("timeout")
                logger.warning(
                    "job %s (%s) exceeded its %gs timeout; failing it. %s", execution.job_id, execution.job.type,
                    limit, "Its task is cancelled." if self.config.async_mode
                    else "Its thread keeps the slot until the handler returns.",
                )
                self._decide(execution, Outcome(failure=failures.timed_out(limit)))
            elif earliest is None or execution.deadline < earliest:
                earliest = execution.deadline
        self._earliest_deadline = earliest

    def _report_overrun(self, now: float) -> None:
        """Say which slots handlers hold whose jobs have ended: at once, then every ``OVERRUN_LOG_EVERY``."""
        overrun = self._overrun()
        if not overrun:
            self._overrun_log_at = now + MAX_WAIT  # looked at again within a second; said at once when it starts
            return
        concurrency = self.config.concurrency
        logger.warning(
            "%d of %d slots are held by handlers that have not returned though their jobs ended (timed out or "
            "cancelled): %s. %s until they return; restart the worker to free them",
            len(overrun), concurrency, ", ".join(f"{e.job_id} ({e.job.type})" for e in overrun[:10]),
            "This worker runs nothing" if len(overrun) >= concurrency
            else f"This worker runs at most {concurrency - len(overrun)} jobs at once",
        )
        self._overrun_log_at = now + OVERRUN_LOG_EVERY

    def _parked(self, execution: Execution) -> None:
        """Snoozed or waiting for a signal: the handler's thread wrote the job back to the store already."""
        execution.release()
        self._undecided -= 1
        self.stats.parked += 1
        self._forget_if_done(execution)

    def _release_unfinished(self, held: HeldJob, reason: str) -> None:
        """The store took this attempt away (cancelled, or recovered): stop reporting it."""
        execution = self._table.get((held.job_id, held.attempt))
        if execution is not None and not execution.released and execution.outcome is None and execution.ctx.parked:
            # Not taken away: its handler parked it, and the heartbeat saw that before the handler's end.
            self._parked(execution)
        elif execution is not None and not execution.released and execution.outcome is None:
            logger.warning("job %s (%s) attempt %d: %s; its result will be discarded",
                           held.job_id, execution.job.type, held.attempt, reason)
            execution.ctx.cancel(reason)
            execution.release()
            self._undecided -= 1
            self.stats.dropped += 1
            self._forget_if_done(execution)

    def _forget_if_done(self, execution: Execution) -> None:
        if execution.thread_done and execution.released:
            with self._table_lock:
                self._table.pop((execution.job_id, execution.job.attempt), None)

    # -- writing outcomes ---------------------------------------------------------------

    def _flush_due(self, now: float) -> bool:
        return now >= self._retry_db_at and (
            self._undecided == 0
            or len(self._unwritten) >= self.config.ack_batch_size
            or now - self._oldest_unwritten >= self.config.ack_flush_window
        )

    def _written_before(self, batch: list[Execution], verdicts: list[Verdict]) -> list[Verdict]:
        """``verdicts``, each refusal of an outcome the store holds already, written by this very
        lease, read as written: a turn that committed while its reply was lost (a connection
        dropped at COMMIT, a pooler restarted) was sent again. It is no job cancelled or recovered
        meanwhile, and counting it dropped contradicted the store."""
        refused = [index for index, verdict in enumerate(verdicts) if verdict is Verdict.REFUSED]
        if not refused:
            return verdicts
        try:
            written = settle.written_before(self._settlements([batch[index] for index in refused]))
        except DatabaseError:
            return verdicts  # not known: said refused, as the store said
        verdicts = list(verdicts)
        for index, was_written in zip(refused, written):
            if was_written:
                verdicts[index] = Verdict.COMPLETED if batch[index].outcome.failure is None else Verdict.FAILED
                logger.info("job %s (%s): its outcome was written before the connection dropped",
                            batch[index].job_id, batch[index].job.type)
        return verdicts

    def _settlements(self, batch: list[Execution]) -> list[Settlement]:
        settlements = []
        for execution in batch:
            failure = execution.outcome.failure
            if failure is not None:
                # Which worker ran the failed attempt, for the history (and Django's TaskResult.worker_ids).
                failure = replace(failure, details={**(failure.details or {}), "worker_id": self.id})
            settlements.append(Settlement(
                execution.job.id, execution.lease, result=execution.outcome.result, failure=failure,
                # Interrupted by a shutdown, or its handler gone since the claim: released
                # without charging the attempt, for a worker that can run it.
                requeue=failure is not None and failure.type in failures.RELEASED,
            ))
        return settlements

    def _outcomes_written(self, batch: list[Execution], verdicts: list[Verdict]) -> None:
        if not batch:
            return
        verdicts = self._written_before(batch, verdicts)
        for execution, verdict in zip(batch, verdicts):
            failure = execution.outcome.failure
            if verdict is Verdict.COMPLETED:
                self.stats.completed += 1
            elif verdict is Verdict.FAILED and failure is not None and failure.type in failures.RELEASED:
                self.stats.released += 1
            elif verdict is Verdict.FAILED:
                # The store logs what became of it (core/settle.py: retry at, or kept as what until when).
                self.stats.failed += 1
            else:
                self.stats.dropped += 1
                logger.warning(
                    "job %s (%s): %s refused, the job was cancelled or recovered meanwhile",
                    execution.job_id, execution.job.type, "failure" if failure else "completion",
                )
            execution.release()
            self._forget_if_done(execution)
        written = set(map(id, batch))
        self._unwritten = [execution for execution in self._unwritten if id(execution) not in written]
        if self._unwritten:
            self._oldest_unwritten = time.monotonic()

    def _database_failed(self, what: str, exc: Exception) -> None:
        unreachable = self._outage.failed(exc)
        if not unreachable:
            logger.warning("%s failed (%s); retrying in %gs", what, exc, DB_RETRY_DELAY)
        close_old_connections()
        # Perhaps only a connection the server dropped: retry at once on a new one.
        reconnect = unreachable and self._outage.failures == 1
        self._retry_db_at = time.monotonic() + (0.0 if reconnect else DB_RETRY_DELAY)
        if self._drain is not None and not reconnect and (
            self.lifecycle.forced or time.monotonic() >= self._drain.deadline
        ):
            # Past the grace period the store is still unreachable: leave the
            # jobs to the reaper (worker_death) rather than hang.
            self._drain.gave_up = True

    # -- shutdown ---------------------------------------------------------------------

    def _drain_turn(self, now: float) -> None:
        assert self._drain is not None
        if self.lifecycle.forced or now >= self._drain.deadline:
            self._interrupt_running(
                "the worker was forced to stop" if self.lifecycle.forced
                else f"the worker shut down; the job was still running after the {self.config.grace_period:g}s grace period"
            )
        elif now >= self._drain.next_log:
            self._drain.next_log = now + DRAIN_LOG_EVERY
            logger.info(
                "draining: still running %d job(s); %.0fs of the grace period left",
                self._undecided, self._drain.deadline - now,
            )

    def _interrupt_running(self, reason: str) -> None:
        for execution in list(self._table.values()):
            if execution.outcome is None and not execution.released:
                execution.ctx.cancel("shutdown")
                self._decide(execution, Outcome(failure=failures.shutdown(reason)))

    def _finished_draining(self) -> bool:
        if self._drain is None:
            return False
        if self._drain.gave_up:
            return True
        with self._table_lock:
            return all(execution.released for execution in self._table.values())


def _has_work_to_claim(types: list[str]) -> bool:
    """Whether the worker has a handler of the project's: one of its own, or Django's tasks sent to django-ojs."""
    if any(job_type != DJANGO_TASK_TYPE for job_type in types):
        return True
    tasks: dict[str, Any] = getattr(settings, "TASKS", None) or {}
    return DJANGO_TASK_TYPE in types and any(
        str(backend.get("BACKEND", "")).startswith("django_ojs.") for backend in tasks.values()
    )


def _runner_bug() -> Failure:
    return Failure(type="WorkerError", message="the worker could not run the handler; see the worker's log")
