"""Fair queues: which job belongs to which tenant (a django-ojs extension of ojs-queue-config; pure).

A queue may name a *fairness key*, a path into each job: ``meta.<name>``
(``meta.tenant``) or ``args.<index>`` optionally followed by ``.<name>``
(``args.0.customer``). FETCH then takes jobs of that queue round-robin
across the key's values -- the tenant whose turn is oldest first -- and,
within one value, in the usual order (priority, then enqueue order).
``key_of`` reads a job's value once, at PUSH; ``core/claim.py`` orders by it.

Weights (``parse_weights``): a value of weight w takes up to w claims in a
round before its turn passes on. ``schedule`` says which value each of a
claim's jobs goes to, ``advance`` what the claim leaves for the next one; the
one-statement claim (``core/pg/fair_claim.py``) does the same arithmetic in SQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest
from .storable import UNSTORABLE

# meta.<name> | args.<index>[.<name>]: a name as the envelope's meta keys are written.
PATH_PATTERN = re.compile(r"(?:meta\.[A-Za-z0-9_-]{1,64}|args\.(?:0|[1-9][0-9]{0,2})(?:\.[A-Za-z0-9_-]{1,64})?)")
# A value is stored in a column of this length; longer values are cut (and share a turn).
MAX_VALUE_LENGTH = 255
# The value of a job whose path leads nowhere (or to null): such jobs share one turn.
NO_VALUE = ""
# Weights: each from 1 to MAX_WEIGHT, for at most MAX_WEIGHTED_VALUES values named (the others: the default).
MAX_WEIGHT = 1000
MAX_WEIGHTED_VALUES = 1000


def parse_path(value: Any, field: str = "fairness_key") -> str | None:
    """A fairness key as an operator sends it; None turns fairness off."""
    if value is None:
        return None
    if not isinstance(value, str) or not PATH_PATTERN.fullmatch(value):  # "$" alone lets a final newline by
        raise InvalidRequest(
            f"{field} must be null, meta.<name> (e.g. meta.tenant) or args.<index>[.<name>] (e.g. args.0.customer)",
            field=field,
        )
    return value


def key_of(path: str, args: Sequence[Any], meta: Mapping[str, Any] | None) -> str:
    """The job's value at ``path``: a string as it is, another scalar as its JSON text, else ``NO_VALUE``."""
    root, *steps = path.split(".")
    value: Any = meta if root == "meta" else args
    for step in steps:
        if isinstance(value, Mapping):
            value = value.get(step)
        elif isinstance(value, Sequence) and not isinstance(value, str) and step.isdigit():
            index = int(step)
            value = value[index] if index < len(value) else None
        else:
            value = None
    if isinstance(value, str):
        return value[:MAX_VALUE_LENGTH]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return NO_VALUE
    return json.dumps(value)[:MAX_VALUE_LENGTH]


def lookup(path: str) -> str:
    """The path as a Django JSON lookup on the job's columns: ``meta.tenant`` -> ``meta__tenant``."""
    return path.replace(".", "__")


def _weight(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_WEIGHT:
        raise InvalidRequest(f"{field} must be an integer from 1 to {MAX_WEIGHT}", field=field)
    return value


def parse_weights(value: Any, field: str = "fairness_weights") -> dict[str, int]:
    """A queue's weights per value as an operator sends them: an object of value -> integer; null: none."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{field} must be an object of value -> weight (e.g. {{\"acme\": 3}}), or null",
                             field=field)
    if len(value) > MAX_WEIGHTED_VALUES:
        raise InvalidRequest(f"{field} names {len(value)} values; at most {MAX_WEIGHTED_VALUES}", field=field)
    weights = {}
    for key, weight in value.items():
        if not isinstance(key, str) or len(key) > MAX_VALUE_LENGTH or UNSTORABLE.search(key):
            raise InvalidRequest(f"{field}: a value is a string of at most {MAX_VALUE_LENGTH} characters, "
                                 "without NUL characters or unpaired surrogates", field=field)
        weights[key] = _weight(weight, f"{field}.{key}")
    return dict(sorted(weights.items()))


def parse_default_weight(value: Any, field: str = "fairness_default_weight") -> int:
    """The weight of a value ``fairness_weights`` does not name; null: 1."""
    return 1 if value is None else _weight(value, field)


@dataclass(frozen=True)
class Turn:
    """A value waiting in a fair queue, as a claim finds it: its weight, and the claims it has
    taken in its current round (``used``, from 0 to weight - 1)."""

    key: str
    weight: int = 1
    used: int = 0

    def left(self) -> int:
        """Claims left in its current round: at least one (a weight lowered below ``used`` ends the round at once)."""
        return self.weight - min(self.used, self.weight - 1)

    def round_of(self, index: int) -> int:
        """The round of this claim's ``index``-th job (from 0) of this value: 0 is its current round."""
        left = self.left()
        return 0 if index < left else 1 + (index - left) // self.weight


def schedule(turns: Sequence[Turn], count: int, taken: Mapping[str, int] | None = None) -> list[str]:
    """The values of the next ``count`` jobs, in order, ``turns`` in turn order; ``taken``: the jobs
    each value has had in this claim already.

    Round by round; in a round, the values in turn order, each taking what is left of its
    weight at once: weights {a: 3, b: 1} serve a a a b a a a b ...
    """
    taken = taken or {}
    slots = sorted(
        (turn.round_of(index), rank, index, turn.key)
        for rank, turn in enumerate(turns)
        for index in range(taken.get(turn.key, 0), taken.get(turn.key, 0) + count)
    )
    return [key for *_, key in slots[:count]]


def advance(turns: Sequence[Turn], got: Mapping[str, int]) -> tuple[dict[str, int], list[str]]:
    """What a claim that gave ``got`` jobs to these values (``turns`` in turn order) leaves behind:
    each served value's claims used in its current round, and the values whose round ended --
    their turn passes to the back -- in the order their rounds ended (by round, then turn order)."""
    used: dict[str, int] = {}
    ended = []
    for rank, turn in enumerate(turns):
        count = got.get(turn.key, 0)
        if count < 1:
            continue
        total = min(turn.used, turn.weight - 1) + count
        used[turn.key] = total % turn.weight
        if total >= turn.weight:
            ended.append((total // turn.weight - 1, rank, turn.key))
    return used, [key for *_, key in sorted(ended)]
