"""Unique jobs in the store: admission at PUSH, enforced by the database (ojs-unique-jobs §8.1).

A job holds its key while its state is in its holding set (``unique.py``);
the partial unique index ``ojs_job_unique_key`` admits one holder per key,
so two concurrent PUSHes of one key can never both be stored: the second
insert waits for the first transaction and then fails. Each unique job is
inserted under its own savepoint; a failed insert finds the holder and
applies ``on_conflict``. A job that leaves its holding set (completed,
cancelled, discarded, or out of ``scheduled``) leaves the index in the same
write, so its key is free at once. A key whose ``period`` has lapsed is
released (``unique_states`` set to NULL) by the PUSH that collides with it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.db import IntegrityError, connection, transaction

from ..models import Job
from ..protocol.errors import Duplicate
from ..protocol.states import TERMINAL, JobState
from ..protocol.unique import UniquePolicy
from .control import cancel
from .unique_keys import current_holder, rejection, release

# Enough for a holder that leaves, a lapsed period and a replace in one PUSH.
MAX_ROUNDS = 5
# The advisory lock space of unique keys being replaced ("OJSU").
REPLACE_LOCK_CLASS = 0x4F4A5355


def insert(jobs: Sequence[Job], policies: Sequence[UniquePolicy | None], now: dt.datetime) -> list[Job]:
    """Store ``jobs`` in order; return, per job, the stored job or (``ignore``) the holder.

    Runs of plain jobs go in one INSERT each; a unique job goes alone under a
    savepoint, so a duplicate later in a batch collides with an earlier one.
    """
    _serialise_replacements(
        sorted({job.unique_key for job, policy in zip(jobs, policies, strict=True)
                if job.unique_key and policy and policy.on_conflict.startswith("replace")})
    )
    out: list[Job] = []
    run: list[Job] = []
    for job, policy in zip(jobs, policies, strict=True):
        if policy is None:
            run.append(job)
            out.append(job)
            continue
        if run:
            Job.objects.bulk_create(run)
            run = []
        out.append(admit(job, policy, now))
    if run:
        Job.objects.bulk_create(run)
    return out


def admit(job: Job, policy: UniquePolicy, now: dt.datetime) -> Job:
    """Insert one unique job, or resolve its conflict by ``policy.on_conflict``."""
    key = job.unique_key
    assert key is not None  # stamped at push (unique_keys.stamp)
    for _ in range(MAX_ROUNDS):
        if JobState(job.state) in policy.holding_states:
            if _try_insert(job):
                return job
            holder = current_holder(key)
        else:
            # Not a holder from its first state (e.g. `states: ["scheduled"]`
            # for a job that is available at once): nothing to collide with in
            # the index, so a duplicate is a holder in one of the policy's states.
            holder = current_holder(key, states=policy.states)
            if holder is None:
                job.save(force_insert=True)
                return job
        if holder is None:
            if Job.objects.filter(id=job.id).exists():
                raise Duplicate(f"a job with id {job.id} already exists", details={"existing_job_id": str(job.id)})
            continue  # the holder left between the insert and the read
        if holder.unique_expires_at is not None and holder.unique_expires_at <= now:
            release(holder)
            continue
        outcome = _resolve(job, key, policy, holder)
        if outcome is not None:
            return outcome
    raise Duplicate(
        "the unique key kept changing hands; retry the push",
        details={"uniqueness_key": job.unique_key},
    )


def _serialise_replacements(keys: list[str]) -> None:
    """PUSHes that replace take their keys' advisory locks first, in key order.

    Without them, concurrent replacements of one key each cancel the holder
    they saw and collide with one another's new job, round after round; with
    them, each replaces the job the previous one stored. No other path takes
    these locks, and they are taken before any row, so they add no cycle.
    """
    if keys and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(k)) FROM unnest(%s::text[]) AS k ORDER BY k",
                [REPLACE_LOCK_CLASS, keys],
            )


def _try_insert(job: Job) -> bool:
    try:
        with transaction.atomic():
            job.save(force_insert=True)
            if _held_in_history(job):
                raise IntegrityError("unique key held by a finished job")
    except IntegrityError:
        job.seq = None
        return False
    return True


def _held_in_history(job: Job) -> bool:
    """Does a finished job hold ``job``'s key (a policy whose states include a terminal one)?

    On a partitioned job table (``core/partitions.py``) the unique index covers the live
    jobs only. Asked after the insert: a holder that finished while it waited moved out of
    the live partition, and is found in its new one by this later read.
    """
    if connection.vendor != "postgresql":
        return False
    return current_holder(job.unique_key or "", states=TERMINAL) is not None


def _resolve(job: Job, key: str, policy: UniquePolicy, holder: Job) -> Job | None:
    """Apply ``on_conflict``: a job to return, an exception, or None to insert again."""
    if policy.on_conflict == "reject":
        raise rejection(holder, key)
    if policy.on_conflict == "ignore":
        holder.deduplicated = True
        return holder
    # replace, replace_except_schedule (§5.2, §5.3): we are strong (§8.1),
    # so even an active holder is cancelled, in this PUSH's transaction.
    if policy.on_conflict == "replace_except_schedule" and holder.state == JobState.SCHEDULED:
        job.state = JobState.SCHEDULED
        job.scheduled_at = holder.scheduled_at
        job.run_at = holder.run_at
        job.enqueued_at = None
    if holder.state not in TERMINAL:
        cancel(holder.id)
    release(holder)  # a terminal state may be in its holding set
    job.replaced_job_id = holder.id
    return None
