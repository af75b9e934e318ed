"""Unique jobs: the policy, the fingerprint and the holding set (ojs-unique-jobs; pure).

The database enforces uniqueness (``core/unique.py``): a job *holds* its
unique key while its state is in its *holding set*, and a partial unique
index over ``unique_key`` admits one holder per key. This module decides,
without a database, what a policy means: which dimensions make the key, how
the key is computed (§4: canonical JSON, SHA-256), which states hold it, and
when a period ends.

The holding set is the policy's ``states``, widened where a job could leave
the set and come back to it: the index cannot let a job re-enter a state in
which another job may meanwhile hold the key (a retry returning to
``available``, a promotion from ``scheduled``), because that transition would
then fail. So a set that names any state a job passes through after it
becomes ``available`` holds through the whole live lifecycle, from PUSH to
a terminal state; only sets of ``scheduled`` and ``pending`` -- which a job
leaves once and never re-enters -- are kept as given. See docs/how-to/unique-jobs.md.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .durations import format_duration, parse_duration
from .errors import InvalidRequest
from .states import JobState

DIMENSIONS = ("type", "queue", "args", "meta")
ON_CONFLICT = ("reject", "replace", "replace_except_schedule", "ignore")
# openapi spells `ignore` as `use_existing` (conformance AUDIT L4-UNIQ-004).
ON_CONFLICT_ALIASES = {"use_existing": "ignore"}
LIVE = frozenset(
    {JobState.SCHEDULED, JobState.PENDING, JobState.AVAILABLE, JobState.ACTIVE, JobState.RETRYABLE}
)
DEFAULT_STATES = LIVE
# States a job enters only at PUSH and leaves for good.
ENTRY_ONLY = frozenset({JobState.SCHEDULED, JobState.PENDING})
MAX_KEYS = 64


@dataclass(frozen=True)
class UniquePolicy:
    keys: tuple[str, ...] = ("type",)
    args_keys: tuple[str, ...] | None = None
    meta_keys: tuple[str, ...] | None = None
    period: dt.timedelta | None = None
    states: frozenset[JobState] = DEFAULT_STATES
    on_conflict: str = "reject"

    def to_dict(self) -> dict[str, Any]:
        """The policy as stored on the job and rendered back to clients."""
        out: dict[str, Any] = {"keys": list(self.keys), "on_conflict": self.on_conflict}
        if self.args_keys is not None:
            out["args_keys"] = list(self.args_keys)
        if self.meta_keys is not None:
            out["meta_keys"] = list(self.meta_keys)
        if self.period is not None:
            out["period"] = format_duration(self.period)
        out["states"] = sorted(state.value for state in self.states)
        return out

    @property
    def holding_states(self) -> frozenset[JobState]:
        """The states in which a job with this policy holds its key (module docstring)."""
        if self.states <= ENTRY_ONLY:
            return self.states
        return self.states | LIVE

    def fingerprint(self, job_type: str, queue: str, args: Any, meta: Mapping[str, Any]) -> str:
        """The uniqueness key (§4.1): SHA-256 of the canonical dimensions, lowercase hex."""
        dimensions: dict[str, Any] = {"type": job_type}
        if "queue" in self.keys:
            dimensions["queue"] = queue
        if "args" in self.keys:
            dimensions["args"] = _selected_args(args, self.args_keys)
        if "meta" in self.keys:
            dimensions["meta"] = {key: meta.get(key) for key in self.meta_keys or ()}
        return hashlib.sha256(canonical_json(dimensions).encode()).hexdigest()


def parse_unique(value: Any, where: str, *, args: Any, meta: Mapping[str, Any]) -> UniquePolicy | None:
    """Validate a ``unique`` object (§2.2); invalid policies raise InvalidRequest naming the field."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{where} must be an object", field=where)
    known = {"keys", "key", "args_keys", "meta_keys", "period", "states", "on_conflict"}
    unknown = sorted(set(value) - known)
    if unknown:
        raise InvalidRequest(f"{where} has unknown fields: {', '.join(unknown)}", field=f"{where}.{unknown[0]}")
    raw_keys = value.get("keys")
    args_keys = _optional_names(value.get("args_keys"), f"{where}.args_keys")
    if raw_keys is None and value.get("key") is not None:
        # ojs-json-format §3.5 (and the Python SDK) write `key`: the fields of
        # args to hash. Names that are all dimensions are read as `keys`.
        named = _optional_names(value["key"] if isinstance(value["key"], list) else [value["key"]], f"{where}.key")
        if named and all(name in DIMENSIONS for name in named):
            raw_keys = list(named)
        else:
            raw_keys, args_keys = ["type", "args"], named
    keys = _names(raw_keys, f"{where}.keys", allowed=DIMENSIONS) if raw_keys is not None else ("type",)
    meta_keys = _optional_names(value.get("meta_keys"), f"{where}.meta_keys")
    if "meta" in keys and not meta_keys:
        raise InvalidRequest(f"{where}.meta_keys must name at least one key when keys has 'meta'", field=f"{where}.meta_keys")
    if args_keys is not None and "args" in keys:
        present = _args_object(args)
        missing = [key for key in args_keys if key not in present]
        if missing:
            raise InvalidRequest(
                f"{where}.args_keys names keys the job's args do not have: {', '.join(missing)}",
                field=f"{where}.args_keys",
            )
    period = None
    if value.get("period") is not None:
        try:
            period = parse_duration(value["period"])
        except ValueError as exc:
            raise InvalidRequest(f"{where}.period: {exc}", field=f"{where}.period") from None
        if period <= dt.timedelta(0):
            raise InvalidRequest(f"{where}.period must be positive", field=f"{where}.period")
    states = DEFAULT_STATES
    if value.get("states") is not None:
        names = _names(value["states"], f"{where}.states", allowed=tuple(s.value for s in JobState))
        if not names:
            raise InvalidRequest(f"{where}.states must name at least one state", field=f"{where}.states")
        states = frozenset(JobState(name) for name in names)
    on_conflict = value.get("on_conflict", "reject")
    on_conflict = ON_CONFLICT_ALIASES.get(on_conflict, on_conflict) if isinstance(on_conflict, str) else on_conflict
    if on_conflict not in ON_CONFLICT:
        raise InvalidRequest(
            f"{where}.on_conflict must be one of {', '.join(ON_CONFLICT)}", field=f"{where}.on_conflict"
        )
    return UniquePolicy(
        keys=keys, args_keys=args_keys, meta_keys=meta_keys, period=period, states=states, on_conflict=on_conflict
    )


def encode_states(states: Iterable[JobState]) -> str:
    """The holding set as the index predicate reads it: ``,active,available,``."""
    return "," + ",".join(sorted(state.value for state in states)) + ","


def decode_states(encoded: str | None) -> frozenset[JobState]:
    if not encoded:
        return frozenset()
    return frozenset(JobState(name) for name in encoded.strip(",").split(",") if name)


def canonical_json(value: Any) -> str:
    """Compact JSON, keys sorted at every level, strings in NFC (§4.1 step 2, §4.2).

    Numbers follow RFC 8785 where Python's repr differs: an integral float is
    written as an integer (``1.0`` -> ``1``), so 1 and 1.0 fingerprint alike.
    """
    return json.dumps(_normalise(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, Mapping):
        return {unicodedata.normalize("NFC", str(key)): _normalise(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(item) for item in value]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def _args_object(args: Any) -> Mapping[str, Any]:
    """The object ``args_keys`` select from: ``args`` itself, or its only element.

    OJS args are an array; the common shape is one object (``[{"user_id": 42}]``).
    """
    if isinstance(args, Mapping):
        return args
    if isinstance(args, list) and len(args) == 1 and isinstance(args[0], Mapping):
        return args[0]
    return {}


def _selected_args(args: Any, args_keys: tuple[str, ...] | None) -> Any:
    if args_keys is None:
        return args
    present = _args_object(args)
    return {key: present.get(key) for key in args_keys}


def _names(value: Any, where: str, *, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidRequest(f"{where} must be an array of strings", field=where)
    bad = [item for item in value if item not in allowed]
    if bad:
        raise InvalidRequest(f"{where}: {bad[0]!r} is not one of {', '.join(allowed)}", field=where)
    return tuple(dict.fromkeys(value))


def _optional_names(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(item, str) and 0 < len(item) <= 255 and "\x00" not in item for item in value
    ):
        raise InvalidRequest(f"{where} must be an array of names (1 to 255 characters, no NUL)", field=where)
    if len(value) > MAX_KEYS:
        raise InvalidRequest(f"{where} names more than {MAX_KEYS} keys", field=where)
    return tuple(dict.fromkeys(value))
