"""Snooze, waits and signals (docs/how-to/snooze-signals-timers.md): a running job parked for later.

A handler that snoozes or waits *parks* its job: ``active`` -> ``scheduled``
until a time (``run_at``), its lease released, the attempt it ran not charged
(``releases`` grows, as for NACK's ``"requeue": true``, so the retry policy
counts ``attempt - releases``). The attempt number itself still grows at the
next claim, so a lease -- (job, attempt) -- is never handed out twice and a
stale worker's ACK, FAIL or snooze stays refused (DESIGN invariant 3).

A signal is stored on the job (the first of a name is kept) and wakes it at
once if it is parked on that name. Every move here locks the one job row by
id (a workflow's signal: its jobs in ``seq`` order, then the workflow's row,
as ``workflows.cancel`` does), so a signal and a wait, a claim, a timeout or
a cancel serialise on the row: the signal is applied exactly once or refused.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.db import transaction

from ..conf import ojs_settings
from ..models import Job, JobError, Workflow, WorkflowNode
from ..protocol.durations import format_timestamp, parse_timestamp, to_millis
from ..protocol.errors import InvalidTransition
from ..protocol.failure import Failure
from ..protocol.states import TERMINAL, JobState, Move, target
from ..protocol.waits import WaitOutcome, signal_name
from ..protocol.waits import payload as checked_payload
from ..protocol.workflows import PENDING
from . import events
from .clock import TxNow, db_now
from .refusal import refusal
from .row_movement import retried_on_row_movement
from .settle import FAILURE_FIELDS, settle_failure
from .types import Lease, Settle
from .workflows import Moved, locked_workflow
from .workflows import advance as advance_workflows

logger = logging.getLogger("django_ojs.jobs")

# What parking writes, besides the state and run_at.
_PARK_FIELDS = ["state", "run_at", "worker_id", "lease_expires_at", "deadline_at", "started_at", "releases",
                "snoozes", "waits", "waiting_for"]


def _locked(job_id: Any) -> tuple[Job | None, dt.datetime]:
    """The job's row, locked by id, and the transaction's clock."""
    job = Job.objects.select_for_update().annotate(db_now=TxNow()).filter(id=job_id).first()
    return job, job.db_now if job is not None else db_now()


def _held(job_id: Any, lease: Lease, move: Move) -> tuple[Job, dt.datetime]:
    """The active job ``lease`` holds, its row locked, and the clock; 404 or 409 otherwise."""
    job, now = _locked(job_id)
    if job is None or job.state != JobState.ACTIVE or not lease.holds(job):
        raise refusal(job, job_id, move)
    return job, now


def _park(job: Job, move: Move, until: dt.datetime) -> None:
    job.state = target(move)
    job.run_at = until
    job.worker_id = None
    job.lease_expires_at = None
    job.deadline_at = None
    job.started_at = None
    job.releases += 1


@retried_on_row_movement
def snooze(job_id: Any, delay: dt.timedelta, *, lease: Lease = Lease()) -> Job:
    """Put the held job back for ``delay``: ``scheduled`` until then, its attempt not charged.

    The snooze beyond ``OJS["MAX_SNOOZES"]`` fails the job instead, not
    retryable (error type ``snooze_limit``): snoozes spend no attempt, so
    nothing else would stop a handler that always snoozes.
    """
    with transaction.atomic():
        job, now = _held(job_id, lease, Move.SNOOZE)
        limit = ojs_settings.MAX_SNOOZES
        if job.snoozes >= limit:
            failure = Failure(
                type="snooze_limit",
                message=f"the job snoozed {job.snoozes} times; OJS['MAX_SNOOZES'] allows {limit}",
                retryable=False,
                details={"snoozes": job.snoozes, "max_snoozes": limit},
            )
            entry, settled = settle_failure(job, failure, now, Settle.POLICY)
            job.save(update_fields=FAILURE_FIELDS)
            JobError.objects.bulk_create([entry])
            events.record(settled)
            advance_workflows({job.seq: job.state})
            return job
        _park(job, Move.SNOOZE, now + delay)
        job.snoozes += 1
        job.waiting_for = None
        job.save(update_fields=_PARK_FIELDS)
        events.record([events.job_event(
            "job.snoozed", job, now,
            snoozes=job.snoozes, delay_ms=to_millis(delay), run_at=format_timestamp(job.run_at),
        )])
        line = f"job {job.id} ({job.type}) attempt {job.attempt} snoozed until {format_timestamp(job.run_at)} " \
               f"(snooze {job.snoozes}/{limit})"
        transaction.on_commit(lambda: logger.info("%s", line))
    return job


@retried_on_row_movement
def wait(job_id: Any, name: str, timeout: dt.timedelta, *, lease: Lease = Lease()) -> tuple[Job, WaitOutcome]:
    """Wait for signal ``name``: its payload if delivered, the timeout if passed, else park the job.

    The wait's deadline is set by its first call (``since + timeout``) and
    kept in ``Job.waits``: the handler, run again when the job wakes, waits
    for the same name and finds the signal or its deadline passed. A job
    parked on a name is woken by that signal or its deadline, whichever first.
    """
    with transaction.atomic():
        job, now = _held(job_id, lease, Move.WAIT)
        record = (job.waits or {}).get(name)
        until = _until(record) if record else now + timeout
        delivered = (job.signals or {}).get(name)
        if delivered is not None or until <= now:
            if job.waiting_for is not None:
                job.waiting_for = None
                job.save(update_fields=["waiting_for"])
            if delivered is not None:
                return job, WaitOutcome(delivered=True, payload=delivered.get("payload"), until=until)
            return job, WaitOutcome(timed_out=True, until=until)
        if record is None:
            record = {"since": format_timestamp(now), "until": format_timestamp(until)}
            job.waits = {**(job.waits or {}), name: record}
        _park(job, Move.WAIT, until)
        job.waiting_for = name
        job.save(update_fields=_PARK_FIELDS)
        events.record([events.job_event(
            "job.waiting", job, now, signal=name, since=record["since"], until=format_timestamp(until),
        )])
    return job, WaitOutcome(parked=True, until=until)


def _until(record: dict[str, Any]) -> dt.datetime:
    until = parse_timestamp(record["until"], allow_relative=False)
    assert isinstance(until, dt.datetime)  # written by wait() above
    return until


@retried_on_row_movement
def signal(job_id: Any, name: str, payload: Any = None) -> Job:
    """Deliver signal ``name`` to a job; wake it if it is parked on that name.

    The name and the payload are checked here, for every door (400 ``invalid_request``).

    409 ``conflict`` if the job is finished (completed, cancelled, discarded)
    or already has a signal of that name: the first is kept, so a signal sent
    twice is applied once and the second sender is told.
    """
    name, payload = signal_name(name), checked_payload(payload)
    with transaction.atomic():
        job, now = _locked(job_id)
        if job is None:
            raise refusal(job, job_id, Move.WAIT)
        _deliver(job, name, payload, now, strict=True)
    return job


def _deliver(job: Job, name: str, payload: Any, now: dt.datetime, *, strict: bool) -> bool:
    """Store the signal on the locked ``job`` and wake it if it waits for it; False if refused (not ``strict``)."""
    if job.state in TERMINAL:
        if not strict:
            return False
        raise InvalidTransition(
            f"cannot signal job {job.id}: it is {job.state}", job_id=str(job.id), current_state=job.state,
            details={"signal": name},
        )
    delivered = job.signals or {}
    if name in delivered:
        if not strict:
            return False
        raise InvalidTransition(
            f"job {job.id} already has signal {name!r} (received at {delivered[name]['received_at']}); "
            "the first is kept",
            job_id=str(job.id), current_state=job.state, details={"signal": name},
        )
    job.signals = {**delivered, name: {"payload": payload, "received_at": format_timestamp(now)}}
    fields = ["signals"]
    woke = job.state == JobState.SCHEDULED and job.waiting_for == name
    if woke:
        job.state = target(Move.PROMOTE)
        job.enqueued_at = now
        job.run_at = None
        job.waiting_for = None
        fields += ["state", "enqueued_at", "run_at", "waiting_for"]
    Job.objects.filter(seq=job.seq).update(**{field: getattr(job, field) for field in fields})
    events.record([events.job_event("job.signalled", job, now, signal=name, woke=woke)])
    return True


@retried_on_row_movement
def signal_workflow(workflow_id: Any, name: str, payload: Any = None) -> tuple[Workflow, int]:
    """Deliver signal ``name`` to every unfinished job of a running workflow, and keep it for its
    steps not yet started; how many jobs got it. 409 if the workflow ended or already has the signal.
    """
    name, payload = signal_name(name), checked_payload(payload)
    for _ in range(20):
        try:
            with transaction.atomic():
                seqs = [seq for seq in WorkflowNode.objects.filter(workflow_id=workflow_id, state=PENDING)
                        .values_list("job_seq", flat=True) if seq is not None]
                # Job rows first, in seq order; then the workflow's row (core/workflows.py's order).
                locked = list(Job.objects.select_for_update().filter(seq__in=seqs).order_by("seq"))
                workflow = locked_workflow(workflow_id, allow_failed=False)
                started = set(
                    WorkflowNode.objects.filter(workflow=workflow, state=PENDING, job_seq__isnull=False)
                    .values_list("job_seq", flat=True)
                )
                if started - {job.seq for job in locked}:
                    raise Moved
                if name in (workflow.signals or {}):
                    raise InvalidTransition(
                        f"workflow {workflow.id} already has signal {name!r}; the first is kept",
                        job_id=str(workflow.id), current_state=workflow.state, details={"signal": name},
                    )
                now = db_now()
                workflow.signals = {**(workflow.signals or {}),
                                    name: {"payload": payload, "received_at": format_timestamp(now)}}
                workflow.save(update_fields=["signals"])
                delivered = sum(_deliver(job, name, payload, now, strict=False) for job in locked)
                return workflow, delivered
        except Moved:
            continue
    raise InvalidTransition(
        f"workflow {workflow_id} kept moving; try again", job_id=str(workflow_id), current_state="running"
    )
