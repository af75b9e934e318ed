"""Rate and concurrency limits: policies and the arithmetic of a budget (ojs-rate-limiting; pure).

A *limit* belongs to a key. A job's own ``rate_limit`` policy names its key
(§6.2); a queue's configuration is the limit of the key ``queue:<name>``
(§7.1's pattern), counted over every job of the queue. FETCH asks, for each
key in play, how many more jobs may start now (``budget``); ``core/limits.py``
reads the usage from the store under the key's lock.

Windows slide (§5.2 "MUST document"): a rate of N per P admits a start when
fewer than N starts happened in the last P. A throttle of N per P admits one
start per P/N, spaced from the previous start (§5.3).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from .durations import format_duration, parse_duration
from .errors import InvalidRequest

KEY_PATTERN = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._:-]*$")
MAX_KEY_LENGTH = 255
ON_LIMIT = ("wait", "reschedule", "drop")
MAX_COUNT = 1_000_000
# A window longer than this would keep every start on record that long.
MAX_PERIOD = dt.timedelta(days=31)


def queue_key(queue: str) -> str:
    return f"queue:{queue}"


@dataclass(frozen=True)
class Window:
    limit: int
    period: dt.timedelta

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "period": format_duration(self.period)}

    @property
    def interval(self) -> dt.timedelta:
        return self.period / self.limit


@dataclass(frozen=True)
class Limit:
    """What one key allows: at most ``concurrency`` active, ``rate`` starts per
    window, starts spaced by ``throttle``. None means that kind is unlimited."""

    key: str
    concurrency: int | None = None
    rate: Window | None = None
    throttle: Window | None = None
    on_limit: str = "wait"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key}
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency
        if self.rate is not None:
            out["rate"] = self.rate.to_dict()
        if self.throttle is not None:
            out["throttle"] = self.throttle.to_dict()
        out["on_limit"] = self.on_limit
        return out

    @property
    def counts_starts(self) -> bool:
        """Whether starts must be logged: a window or a throttle needs their times."""
        return self.rate is not None or self.throttle is not None

    @property
    def longest_period(self) -> dt.timedelta:
        return max((w.period for w in (self.rate, self.throttle) if w is not None), default=dt.timedelta(0))

    def overridden(self, override: Mapping[str, Any]) -> Limit:
        """This limit with an operator's override (§10.2) laid over it, field by field."""
        changes: dict[str, Any] = {}
        for name in ("concurrency", "rate", "throttle"):
            if name in override:
                changes[name] = override[name]
        return replace(self, **changes)


@dataclass(frozen=True)
class Usage:
    """What the store says about a key now."""

    active: int = 0
    starts_in_window: int = 0
    oldest_start_in_window: dt.datetime | None = None
    last_start: dt.datetime | None = None


@dataclass(frozen=True)
class Budget:
    remaining: int | None  # None: unlimited
    # When one more start will be allowed (None: now, or when a job finishes).
    retry_at: dt.datetime | None = None
    strategy: str | None = None  # the kind of limit that binds


def budget(limit: Limit, usage: Usage, now: dt.datetime) -> Budget:
    """How many more jobs of ``limit.key`` may start at ``now``: the tightest kind wins (§7.2)."""
    candidates: list[Budget] = []
    if limit.concurrency is not None:
        candidates.append(Budget(max(0, limit.concurrency - usage.active), None, "concurrency"))
    if limit.rate is not None:
        left = max(0, limit.rate.limit - usage.starts_in_window)
        reset = usage.oldest_start_in_window + limit.rate.period if usage.oldest_start_in_window else None
        candidates.append(Budget(left, reset if left == 0 else None, "rate"))
    if limit.throttle is not None:
        next_at = usage.last_start + limit.throttle.interval if usage.last_start else None
        ready = next_at is None or next_at <= now
        candidates.append(Budget(1 if ready else 0, None if ready else next_at, "throttle"))
    if not candidates:
        return Budget(None)
    tightest = min(candidates, key=lambda b: b.remaining)
    if tightest.remaining == 0:
        # Every exhausted kind must allow the next start; the latest one decides.
        waits = [b.retry_at for b in candidates if b.remaining == 0]
        retry_at = None if None in waits else max(waits)
        return Budget(0, retry_at, tightest.strategy)
    return tightest


# -- parsing -------------------------------------------------------------------


def size_of(limit: Limit, strategy: str | None) -> int | None:
    """The size of the part of ``limit`` a budget's ``strategy`` names: its concurrency, or its window's limit."""
    if strategy == "concurrency":
        return limit.concurrency
    window = limit.rate if strategy == "rate" else limit.throttle if strategy == "throttle" else None
    return window.limit if window else None


def parse_job_limit(value: Any, where: str, *, queue: str) -> Limit | None:
    """A job's ``rate_limit`` (§6.1), or openapi's ``{"max_per_second": n}``.

    Without a ``key`` the limit is the job's queue's (``queue:<name>``): the
    conformance suite's form names no key (AUDIT L4-RL-001).
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{where} must be an object", field=where)
    _reject_unknown(value, where, {"key", "concurrency", "rate", "throttle", "on_limit", "max_per_second"})
    key = value.get("key", queue_key(queue))
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key) or len(key) > MAX_KEY_LENGTH:
        raise InvalidRequest(
            f"{where}.key must match {KEY_PATTERN.pattern} (at most {MAX_KEY_LENGTH} characters)",
            field=f"{where}.key",
        )
    limit = parse_limit_fields(value, where, key=key)
    if value.get("max_per_second") is not None:
        if limit.rate is not None:
            raise InvalidRequest(f"{where}: give rate or max_per_second, not both", field=f"{where}.max_per_second")
        count = _count(value["max_per_second"], f"{where}.max_per_second", minimum=1)
        limit = replace(limit, rate=Window(count, dt.timedelta(seconds=1)))
    if limit.concurrency is None and limit.rate is None and limit.throttle is None:
        raise InvalidRequest(
            f"{where} must set concurrency, rate, throttle or max_per_second", field=where
        )
    on_limit = value.get("on_limit", "wait")
    if on_limit not in ON_LIMIT:
        raise InvalidRequest(f"{where}.on_limit must be one of {', '.join(ON_LIMIT)}", field=f"{where}.on_limit")
    return replace(limit, on_limit=on_limit)


def parse_limit_fields(value: Mapping[str, Any], where: str, *, key: str) -> Limit:
    """``concurrency``, ``rate`` and ``throttle`` of a job policy, a queue's
    configuration or an override; each may be null (unlimited)."""
    def at(name: str) -> str:  # the field's path, from the top of the body when ``where`` is ""
        return f"{where}.{name}" if where else name

    concurrency = None
    if value.get("concurrency") is not None:
        concurrency = _count(value["concurrency"], at("concurrency"), minimum=0)
    return Limit(
        key=key,
        concurrency=concurrency,
        rate=parse_window(value.get("rate"), at("rate")),
        throttle=parse_window(value.get("throttle"), at("throttle")),
    )


def parse_window(value: Any, where: str) -> Window | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{where} must be an object with limit and period", field=where)
    _reject_unknown(value, where, {"limit", "period"})
    limit = _count(value.get("limit"), f"{where}.limit", minimum=1)
    try:
        period = parse_duration(value.get("period"))
    except ValueError as exc:
        raise InvalidRequest(f"{where}.period: {exc}", field=f"{where}.period") from None
    if not dt.timedelta(milliseconds=1) <= period <= MAX_PERIOD:
        raise InvalidRequest(f"{where}.period must be from 1 ms to 31 days", field=f"{where}.period")
    return Window(limit, period)


def window_from_dict(value: Mapping[str, Any] | None) -> Window | None:
    """A stored window (written by ``Window.to_dict``)."""
    if not value:
        return None
    return Window(int(value["limit"]), parse_duration(value["period"]))


def limit_from_dict(value: Mapping[str, Any]) -> Limit:
    """A stored limit (written by ``Limit.to_dict``)."""
    return Limit(
        key=value["key"],
        concurrency=value.get("concurrency"),
        rate=window_from_dict(value.get("rate")),
        throttle=window_from_dict(value.get("throttle")),
        on_limit=value.get("on_limit", "wait"),
    )


def _count(value: Any, where: str, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= MAX_COUNT:
        raise InvalidRequest(f"{where} must be an integer from {minimum} to {MAX_COUNT}", field=where)
    return value


def _reject_unknown(value: Mapping[str, Any], where: str, known: set[str]) -> None:
    unknown = sorted(set(value) - known)
    if unknown:
        raise InvalidRequest(f"{where} has unknown fields: {', '.join(unknown)}", field=f"{where}.{unknown[0]}")
