"""Who holds a unique key (ojs-unique-jobs §8.1): the index's predicate, a new job's key, finding and freeing the holder.

A job holds its key while its state is in its holding set (``protocol/unique.py``);
the partial unique index ``ojs_job_unique_key`` admits one holder per key. A
job that leaves its holding set leaves the index in the same write, so its
key is free at once. Admission at PUSH is ``core/unique.py``'s.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import IntegrityError
from django.db.models import Q, Value
from django.db.models.functions import Concat, StrIndex
from django.db.models.lookups import GreaterThan

from ..models import Job
from ..protocol.errors import DuplicateJob
from ..protocol.states import JobState
from ..protocol.unique import UniquePolicy, encode_states


def holds_key() -> Q:
    """Rows that hold their unique key: the index's predicate, so it can serve the query."""
    return Q(unique_key__isnull=False) & Q(
        GreaterThan(StrIndex("unique_states", Concat(Value(","), "state", Value(","))), 0)
    )


def stamp(job: Job, policy: UniquePolicy, now: dt.datetime) -> None:
    """Give a new job its unique columns."""
    job.unique = policy.to_dict()
    job.unique_key = policy.fingerprint(job.type, job.queue, job.args, job.meta)
    job.unique_states = encode_states(policy.holding_states)
    job.unique_expires_at = now + policy.period if policy.period else None


def current_holder(key: str, *, states: frozenset[JobState] | None = None) -> Job | None:
    rows = Job.objects.filter(holds_key(), unique_key=key)
    if states is not None:
        rows = rows.filter(state__in=sorted(states))
    return rows.first()


def release(holder: Job) -> None:
    """Free a key its holder keeps no longer (lapsed period, replaced in a terminal state)."""
    Job.objects.filter(holds_key(), seq=holder.seq).update(unique_states=None)


@contextmanager
def reentry_guard(job_id: Any) -> Iterator[None]:
    """Turn a job's return into its holding set while another job holds its key
    (a dead-letter retry) into a ``duplicate`` naming the holder, instead of
    an integrity error."""
    try:
        yield
    except IntegrityError:
        job = Job.objects.filter(id=job_id).only("unique_key").first()
        key = job.unique_key if job is not None else None
        holder = current_holder(key) if key else None
        if holder is None or key is None:
            raise
        raise rejection(holder, key) from None


def rejection(holder: Job, key: str) -> DuplicateJob:
    return DuplicateJob(
        f"job {holder.id} ({holder.state}) already holds this unique key",
        existing_job_id=str(holder.id),
        existing_job_state=holder.state,
        uniqueness_key=key,
    )
