"""The job search box: an id, a type, or a meta value, each answered from an index.

- a UUID finds that job (the unique index on ``id``);
- ``key:value`` (or ``key=value``) finds jobs whose meta has that entry;
- anything else is matched as an exact type (``ojs_job_type``) or as the
  value of one of ``OJS["ADMIN_SEARCH_META_KEYS"]`` (tenant id, correlation
  id by default).

Meta is matched by containment (``meta @> {"key": "value"}``), which the GIN
index ``ojs_job_meta`` serves on PostgreSQL; a substring search (Django's
default ``icontains``) would read every row of the table.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from django.db import connection
from django.db.models import Q

from ..conf import ojs_settings

HELP_TEXT = (
    "A job id, an exact type (email.send), a tenant or correlation id, or any meta entry as key:value."
)
_META_ENTRY = re.compile(r"^(?P<key>[\w.\-]+)\s*[:=]\s*(?P<value>.+)$")


def job_search(term: str) -> Q | None:
    """The condition a search term stands for; None for an empty term."""
    term = term.strip()
    if not term:
        return None
    try:
        return Q(id=uuid.UUID(term))
    except ValueError:
        pass
    entry = _META_ENTRY.match(term)
    if entry:
        return meta_has(entry["key"], entry["value"].strip())
    condition = Q(type=term)
    for key in ojs_settings.ADMIN_SEARCH_META_KEYS:
        condition |= meta_has(key, term)
    return condition


def meta_has(key: str, value: str) -> Q:
    """meta[key] equals ``value``, as a string or as the JSON number/boolean it spells."""
    candidates: list[Any] = [value]
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    if parsed != value and isinstance(parsed, (int, float, bool)):
        candidates.append(parsed)
    condition = Q()
    for candidate in candidates:
        if connection.vendor == "postgresql":
            # Spelled out so the planner can use the partial index (WHERE meta <> '{}'),
            # which it cannot infer from the containment alone.
            condition |= Q(meta__contains={key: candidate}) & ~Q(meta={})
        else:
            # SQLite has no containment lookup (nor a GIN index to serve one).
            condition |= Q(**{f"meta__{key}": candidate})
    return condition
