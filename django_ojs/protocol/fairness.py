"""Fair queues: which job belongs to which tenant (a django-ojs extension of ojs-queue-config; pure).

A queue may name a *fairness key*, a path into each job: ``meta.<name>``
(``meta.tenant``) or ``args.<index>`` optionally followed by ``.<name>``
(``args.0.customer``). FETCH then takes jobs of that queue round-robin
across the key's values -- the tenant whose last claim is oldest first --
and, within one value, in the usual order (priority, then enqueue order).
``key_of`` reads a job's value once, at PUSH; ``core/claim.py`` orders by it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import InvalidRequest

# meta.<name> | args.<index>[.<name>]: a name as the envelope's meta keys are written.
PATH_PATTERN = re.compile(r"^(?:meta\.[A-Za-z0-9_-]{1,64}|args\.(?:0|[1-9][0-9]{0,2})(?:\.[A-Za-z0-9_-]{1,64})?)$")
# A value is stored in a column of this length; longer values are cut (and share a turn).
MAX_VALUE_LENGTH = 255
# The value of a job whose path leads nowhere (or to null): such jobs share one turn.
NO_VALUE = ""


def parse_path(value: Any, field: str = "fairness_key") -> str | None:
    """A fairness key as an operator sends it; None turns fairness off."""
    if value is None:
        return None
    if not isinstance(value, str) or not PATH_PATTERN.match(value):
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


def round_robin(keys: Sequence[str], count: int) -> list[tuple[str, int]]:
    """How many of ``count`` jobs each key's turn takes, keys in turn order: one each, round and round.

    Keys beyond ``count`` get nothing this time; they come first next time, their last claim being older.
    """
    if not keys or count < 1:
        return []
    each, extra = divmod(count, len(keys))
    return [(key, each + (1 if position < extra else 0)) for position, key in enumerate(keys)
            if each or position < extra]
