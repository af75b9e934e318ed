"""The columns a new job takes from its spec: one definition for both PUSH paths.

The stepwise PUSH (``core/push.py``) builds model instances from them; the
one-statement PUSH (``core/pg/push.py``) turns them into JSON rows. Every
other column of a new job is decided by the store: its state and clock, or
the model's defaults.
"""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from uuid6 import uuid7

from ..conf import ojs_settings
from ..protocol import fairness
from ..protocol.envelope import JobSpec
from ..protocol.retry import RetryPolicy
from .queue_settings import settings_of

# The attnames spec_columns sets, always all of them.
SPEC_COLUMNS = (
    "id", "type", "queue", "args", "meta", "priority", "max_attempts", "retry", "timeout",
    "visibility_timeout", "tags", "schema", "extra", "given_times", "cron_name", "expires_at",
    "rate_limit", "rate_key", "fair_key",
)


@dataclass(frozen=True)
class Defaults:
    """The configured durations a job gets when its spec names none: read once per batch."""

    timeout: dt.timedelta | None
    visibility_timeout: dt.timedelta

    @classmethod
    def from_settings(cls) -> Defaults:
        seconds = ojs_settings.DEFAULT_TIMEOUT
        return cls(
            timeout=dt.timedelta(seconds=seconds) if seconds else None,
            visibility_timeout=dt.timedelta(seconds=ojs_settings.DEFAULT_VISIBILITY_TIMEOUT),
        )


def spec_columns(
    spec: JobSpec, defaults: Defaults, expires_at: dt.datetime | None, fair_paths: dict[str, str | None] | None = None
) -> dict[str, Any]:
    """attname -> value of the columns in ``SPEC_COLUMNS``; ``expires_at`` resolved by the caller.

    ``fair_paths``: a batch's cache of each queue's fairness key, filled as its jobs are read.
    """
    limit = spec.rate_limit
    return {
        "id": spec.id or uuid7(),
        "type": spec.type,
        "queue": spec.queue,
        "args": spec.args,
        "meta": spec.meta,
        "priority": spec.priority,
        "max_attempts": spec.retry.max_attempts,
        "retry": retry_dict(spec.retry),
        "timeout": spec.timeout if spec.timeout is not None else defaults.timeout,
        "visibility_timeout": spec.visibility_timeout or defaults.visibility_timeout,
        "tags": spec.tags,
        "schema": spec.schema,
        "extra": spec.extra,
        "given_times": spec.given_times,
        "cron_name": spec.cron_name,
        "expires_at": expires_at,
        "rate_limit": None if limit is None else limit.to_dict(),
        "rate_key": None if limit is None else limit.key,
        "fair_key": fair_key(spec, fair_paths),
    }


def fair_key(spec: JobSpec, fair_paths: dict[str, str | None] | None = None) -> str | None:
    """The job's value of its queue's fairness key, or None when the queue is not fair (the cached setting)."""
    if fair_paths is None:
        path = settings_of(spec.queue).fairness_key
    elif spec.queue in fair_paths:
        path = fair_paths[spec.queue]
    else:
        path = fair_paths[spec.queue] = settings_of(spec.queue).fairness_key
    return None if path is None else fairness.key_of(path, spec.args, spec.meta)


def new_ids(count: int) -> list[uuid.UUID]:
    """``count`` new job ids, UUIDv7 (RFC 9562 §5.7): one clock read and one entropy read for them all.

    ``uuid6.uuid7()`` reads both per id (~15 µs); a batch of 1,000 spent a
    tenth of its time there. The ids share the millisecond; 74 random bits
    keep them apart (jobs are ordered by ``seq``, not by id).
    """
    millis = (time.time_ns() // 1_000_000) & 0xFFFF_FFFF_FFFF
    prefix = (millis << 80) | (0x7 << 76) | (0b10 << 62)  # time, version 7, variant
    entropy = os.urandom(10 * count)
    ids = []
    for start in range(0, 10 * count, 10):
        bits = int.from_bytes(entropy[start:start + 10])
        # uuid.UUID(int=...) without its range check (the value is 128 bits by
        # construction), as UUID.__init__ sets it: a third of the time.
        made = _new(_UUID)
        _set(made, "int", prefix | (bits >> 68) << 64 | (bits & _RAND_B))
        _set(made, "is_safe", _UNKNOWN)
        ids.append(made)
    return ids


_RAND_B = (1 << 62) - 1
_UUID, _UNKNOWN = uuid.UUID, uuid.SafeUUID.unknown
_new, _set = object.__new__, object.__setattr__


def retry_dict(policy: RetryPolicy) -> dict[str, Any]:
    """``policy.to_dict()``, a fresh dict per job (callers may change a job's), formatted once per policy."""
    stored = _retry_dict(policy)
    return {**stored, "non_retryable_errors": list(stored["non_retryable_errors"])}


@lru_cache(maxsize=256)
def _retry_dict(policy: RetryPolicy) -> dict[str, Any]:
    # Policies are frozen and hashable; most jobs share a handful (the default, their handler's).
    return policy.to_dict()
