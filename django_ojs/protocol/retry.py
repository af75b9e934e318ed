"""Retry policies: validation, backoff and the retry-or-not decision (pure).

Implements ojs-retry.md §2–§8 and §11. A policy arrives as the client's
``options.retry`` object, is validated and merged with the defaults by
``parse_policy``, is stored with the job in its canonical form
(``RetryPolicy.to_dict``), and is consulted after every failed attempt by
``decide``.

The strategy is never inferred from ``backoff_coefficient`` (§3 allows an
explicit ``backoff_strategy`` extension field): it is exponential unless the
client names another. Exponential with coefficient 1.0 already yields a
constant delay, which is all the inference §3 and §12.5 rely on.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import timedelta
from typing import Any, TypeVar

from .durations import format_duration, parse_duration
from .errors import PolicyInvalid

T = TypeVar("T")

ON_EXHAUSTION = frozenset({"discard", "dead_letter"})
STRATEGIES = frozenset({"exponential", "linear", "polynomial", "constant"})
# "none" is the spec's own name for constant backoff (§3.1).
_STRATEGY_ALIASES = {"none": "constant"}

# Bounds that keep stored values and timestamp arithmetic far from overflow.
_MAX_ATTEMPTS = 1_000_000
_MAX_DURATION = timedelta(days=365)


@dataclass(frozen=True)
class RetryPolicy:
    """An effective retry policy (§2.1), every field resolved."""

    max_attempts: int = 3
    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    max_interval: timedelta = timedelta(minutes=5)
    jitter: bool = True
    non_retryable_errors: tuple[str, ...] = ()
    on_exhaustion: str = "discard"  # "discard" | "dead_letter"
    backoff_strategy: str = "exponential"  # "exponential" | "linear" | "polynomial" | "constant"

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON form stored with the job and echoed on the wire."""
        return {
            "max_attempts": self.max_attempts,
            "initial_interval": format_duration(self.initial_interval),
            "backoff_coefficient": float(self.backoff_coefficient),
            "max_interval": format_duration(self.max_interval),
            "jitter": self.jitter,
            "non_retryable_errors": list(self.non_retryable_errors),
            "on_exhaustion": self.on_exhaustion,
            "backoff_strategy": self.backoff_strategy,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetryPolicy:
        """Rebuild a policy from ``to_dict`` output (trusted: it was validated before storing).

        A missing key takes the class default, so rows stored before a field
        existed still load.
        """
        known = {f.name for f in fields(cls)}
        values = {name: value for name, value in data.items() if name in known}
        for name in ("initial_interval", "max_interval"):
            if name in values:
                values[name] = parse_duration(values[name])
        if "non_retryable_errors" in values:
            values["non_retryable_errors"] = tuple(values["non_retryable_errors"])
        if "backoff_coefficient" in values:
            values["backoff_coefficient"] = float(values["backoff_coefficient"])
        return cls(**values)


DEFAULT_POLICY = RetryPolicy()  # ojs-retry §8


# --- validation -------------------------------------------------------------


def parse_policy(raw: object, defaults: RetryPolicy = DEFAULT_POLICY, *, field: str = "retry") -> RetryPolicy:
    """Validate a client's retry policy and merge it over ``defaults`` (§8.1, §11.1).

    ``None`` means no policy was given and returns ``defaults``. Unknown keys
    are ignored. Aliases: ``initial_interval_ms`` / ``max_interval_ms``
    (integer milliseconds, the HTTP binding's spelling), ``backoff_type`` for
    ``backoff_strategy``, ``"none"`` for ``"constant"``. Two spellings of one
    field may both be given only if they agree.

    Interval merging: an interval the client gave wins over one inherited
    from ``defaults``. If only ``initial_interval`` is given and it exceeds
    the inherited ``max_interval``, the max is raised to match; if only
    ``max_interval`` is given and it is below the inherited
    ``initial_interval``, the initial interval is lowered to match. Only two
    client-given intervals that conflict are rejected.

    Raises PolicyInvalid whose message starts with the dotted field path,
    e.g. ``retry.backoff_coefficient must be >= 1.0 (got 0.5)``.
    """
    if raw is None:
        return defaults
    if not isinstance(raw, Mapping):
        raise PolicyInvalid(f"{field} must be an object", field=field)
    changes: dict[str, Any] = {
        name: parse(raw[name], f"{field}.{name}") for name, parse in _SIMPLE_FIELDS.items() if name in raw
    }
    strategy = _aliased(raw, field, {"backoff_strategy": _parse_strategy, "backoff_type": _parse_strategy})
    if strategy is not None:
        changes["backoff_strategy"] = strategy[0]
    changes.update(_merge_intervals(raw, field, defaults))
    return replace(defaults, **changes)


def _parse_max_attempts(value: object, path: str) -> int:
    number = _as_integer(value)
    if number is None or number < 0:
        raise PolicyInvalid(f"{path} must be a non-negative integer (got {value!r})", field=path)
    if number > _MAX_ATTEMPTS:
        raise PolicyInvalid(f"{path} must be at most {_MAX_ATTEMPTS}", field=path)
    return number


def _parse_coefficient(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyInvalid(f"{path} must be a number (got {value!r})", field=path)
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = math.inf
    if not math.isfinite(number):
        raise PolicyInvalid(f"{path} must be a finite number", field=path)
    if number < 1.0:
        raise PolicyInvalid(f"{path} must be >= 1.0 (got {value!r})", field=path)
    return number


def _parse_jitter(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise PolicyInvalid(f"{path} must be a boolean (got {value!r})", field=path)
    return value


def _parse_error_list(value: object, path: str) -> tuple[str, ...]:
    # A bare string is iterable too; refuse it rather than split it into letters.
    if not isinstance(value, (list, tuple)):
        raise PolicyInvalid(f"{path} must be an array of strings", field=path)
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            item_path = f"{path}[{index}]"
            raise PolicyInvalid(f"{item_path} must be a non-empty string (got {item!r})", field=item_path)
    return tuple(value)


def _parse_on_exhaustion(value: object, path: str) -> str:
    if not isinstance(value, str) or value not in ON_EXHAUSTION:
        raise PolicyInvalid(f"{path} must be 'discard' or 'dead_letter' (got {value!r})", field=path)
    return value


def _parse_strategy(value: object, path: str) -> str:
    name = _STRATEGY_ALIASES.get(value, value) if isinstance(value, str) else None
    if name is None or name not in STRATEGIES:
        allowed = ", ".join(sorted(STRATEGIES | _STRATEGY_ALIASES.keys()))
        raise PolicyInvalid(f"{path} must be one of {allowed} (got {value!r})", field=path)
    return name


def _parse_duration_field(value: object, path: str) -> timedelta:
    try:
        delta = parse_duration(value)
    except ValueError as exc:
        message = f"{path} must be an ISO 8601 duration such as 'PT1S' (got {value!r})"
        raise PolicyInvalid(message, field=path) from exc
    return _check_interval(delta, path)


def _parse_millis_field(value: object, path: str) -> timedelta:
    millis = _as_integer(value)
    if millis is None or millis < 0:
        raise PolicyInvalid(f"{path} must be a non-negative integer of milliseconds (got {value!r})", field=path)
    # Compare before building the timedelta: a huge int would overflow it.
    if millis > _MAX_DURATION // timedelta(milliseconds=1):
        raise PolicyInvalid(f"{path} must be at most 365 days", field=path)
    return _check_interval(timedelta(milliseconds=millis), path)


def _check_interval(delta: timedelta, path: str) -> timedelta:
    # max_interval must be positive too: it is >= initial_interval, which must be > 0.
    if delta <= timedelta(0):
        raise PolicyInvalid(f"{path} must be greater than zero", field=path)
    if delta > _MAX_DURATION:
        raise PolicyInvalid(f"{path} must be at most 365 days (got {format_duration(delta)})", field=path)
    return delta


def _merge_intervals(raw: Mapping[str, Any], field: str, defaults: RetryPolicy) -> dict[str, timedelta]:
    """Resolve both intervals so that max_interval >= initial_interval (see parse_policy)."""
    initial = _aliased(
        raw, field, {"initial_interval": _parse_duration_field, "initial_interval_ms": _parse_millis_field}
    )
    maximum = _aliased(raw, field, {"max_interval": _parse_duration_field, "max_interval_ms": _parse_millis_field})
    start = initial[0] if initial else defaults.initial_interval
    cap = maximum[0] if maximum else defaults.max_interval
    if initial and maximum and cap < start:
        raise PolicyInvalid(
            f"{maximum[1]} must be >= {initial[1]} ({format_duration(cap)} < {format_duration(start)})",
            field=maximum[1],
        )
    if initial and cap < start:
        cap = start
    elif maximum and cap < start:
        start = cap
    return {"initial_interval": start, "max_interval": cap}


def _aliased(
    raw: Mapping[str, Any], field: str, spellings: dict[str, Callable[[object, str], T]]
) -> tuple[T, str] | None:
    """Parse a field that has several spellings; return (value, dotted path of the first one present)."""
    found = [(parse(raw[key], f"{field}.{key}"), f"{field}.{key}") for key, parse in spellings.items() if key in raw]
    if not found:
        return None
    value, path = found[0]
    for other, other_path in found[1:]:
        if other != value:
            raise PolicyInvalid(f"{path} and {other_path} disagree", field=path)
    return value, path


def _as_integer(value: object) -> int | None:
    """The integer a JSON number stands for, or None.

    ``true`` is not an integer; ``3.0`` is, as JSON Schema's "integer" type allows.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


_SIMPLE_FIELDS: dict[str, Callable[[object, str], Any]] = {
    "max_attempts": _parse_max_attempts,
    "backoff_coefficient": _parse_coefficient,
    "jitter": _parse_jitter,
    "non_retryable_errors": _parse_error_list,
    "on_exhaustion": _parse_on_exhaustion,
}


# --- backoff ----------------------------------------------------------------


def backoff_delay(policy: RetryPolicy, retry_number: int, rng: random.Random | None = None) -> timedelta:
    """Delay before retry ``retry_number`` (1 = the retry after attempt 1 failed).

    Strategy formula (§3), capped at max_interval (§3.5), then when jitter is
    on multiplied by a uniform [0.5, 1.5) factor (§5.1) and capped again (§5.3).
    """
    if retry_number < 1:
        raise ValueError(f"retry_number must be >= 1 (got {retry_number})")
    cap = policy.max_interval
    if _reaches_cap(policy, retry_number):
        delay = cap
    else:
        delay = min(policy.initial_interval * _growth(policy, retry_number), cap)
    if policy.jitter:
        draw = rng.random() if rng is not None else random.random()
        delay = min(delay * (0.5 + draw), cap)
    return delay


def _growth(policy: RetryPolicy, n: int) -> float:
    """The factor applied to initial_interval for retry ``n`` (Appendix A)."""
    coefficient = policy.backoff_coefficient
    strategy = policy.backoff_strategy
    if strategy == "linear":
        return float(n)
    if strategy == "exponential":
        return coefficient ** (n - 1)
    if strategy == "polynomial":
        return float(n) ** coefficient
    return 1.0  # constant


def _reaches_cap(policy: RetryPolicy, n: int) -> bool:
    """Whether the raw delay for retry ``n`` is at least max_interval.

    Decided with logarithms and int/float comparisons (exact in Python, never
    overflowing), so ``_growth`` is only evaluated where its result is below
    max_interval / initial_interval and cannot overflow.
    """
    if policy.max_interval <= policy.initial_interval:
        return True
    log_room = math.log(policy.max_interval / policy.initial_interval)
    coefficient = policy.backoff_coefficient
    strategy = policy.backoff_strategy
    if strategy == "linear":
        return math.log(n) >= log_room
    if strategy == "exponential":
        return coefficient > 1.0 and n - 1 >= log_room / math.log(coefficient)
    if strategy == "polynomial":
        return math.log(n) * coefficient >= log_room
    return False  # constant never grows


# --- non-retryable errors ---------------------------------------------------


def matches_non_retryable(patterns: Iterable[str], candidates: Iterable[str | None]) -> bool:
    """Whether any candidate error type matches a ``non_retryable_errors`` entry (§6.2).

    An entry matches exactly, or, when it ends in ``.*``, matches every type
    starting with the part before the ``*`` (so ``auth.*`` matches
    ``auth.token_expired`` but not ``auth``). Matching is case-sensitive;
    ``None`` candidates are skipped.
    """
    exact: set[str] = set()
    prefixes: list[str] = []
    for pattern in patterns:
        if pattern.endswith(".*"):
            prefixes.append(pattern[:-1])  # keep the dot: "auth.*" -> "auth."
        exact.add(pattern)
    return any(
        candidate in exact or any(candidate.startswith(prefix) for prefix in prefixes)
        for candidate in candidates
        if candidate is not None
    )


# --- the decision after a failure -------------------------------------------

HANDLER_CODES = frozenset({"RETRY", "DISCARD", "DEAD_LETTER", "FAIL"})  # §7.1, exact uppercase only

# Handler codes that end the job whatever the policy says (§7.2): (dead_letter, reason).
_HANDLER_VERDICTS = {
    "DISCARD": (False, "handler_discard"),
    "FAIL": (False, "handler_fail"),
    "DEAD_LETTER": (True, "handler_dead_letter"),
}


@dataclass(frozen=True)
class FailureDecision:
    """What to do with a job whose attempt just failed."""

    retry: bool  # True -> the job goes to retryable
    delay: timedelta | None  # set when retry
    dead_letter: bool  # when not retried: whether the job enters the dead letter queue
    reason: str  # "retry", "exhausted", "non_retryable", "handler_discard",
    # "handler_dead_letter", "handler_fail" or "not_retryable_flag"


def decide(
    policy: RetryPolicy,
    attempts_used: int,
    *,
    error_types: Iterable[str | None] = (),
    handler_code: str | None = None,
    retryable: bool | None = None,
    rng: random.Random | None = None,
) -> FailureDecision:
    """Retry or give up after a failed attempt (§7.2, §6.3, ojs-core §7.4).

    ``attempts_used`` counts the attempts charged so far, the failed one
    included. A handler code outside HANDLER_CODES (such as the binding's
    ``handler_error``) is no code at all, like ``RETRY``. ``max_attempts`` 0
    behaves like 1: the attempt that just failed was the only one.
    """
    if attempts_used < 1:
        raise ValueError(f"attempts_used must be >= 1 (got {attempts_used})")
    if handler_code in _HANDLER_VERDICTS:
        dead_letter, reason = _HANDLER_VERDICTS[handler_code]
        return FailureDecision(retry=False, delay=None, dead_letter=dead_letter, reason=reason)
    if retryable is False:
        return _give_up(policy, "not_retryable_flag")
    if matches_non_retryable(policy.non_retryable_errors, error_types):
        return _give_up(policy, "non_retryable")
    if attempts_used >= max(policy.max_attempts, 1):
        return _give_up(policy, "exhausted")
    return FailureDecision(retry=True, delay=backoff_delay(policy, attempts_used, rng), dead_letter=False, reason="retry")


def _give_up(policy: RetryPolicy, reason: str) -> FailureDecision:
    # Every way of giving up that the handler did not choose follows on_exhaustion (§6.3).
    return FailureDecision(
        retry=False, delay=None, dead_letter=policy.on_exhaustion == "dead_letter", reason=reason
    )
