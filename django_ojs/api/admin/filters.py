"""The job filter of ojs-admin-api §7.1 and §8, from a query string (lists) or a body's ``filter`` (bulk moves).

``state``, ``queue``, ``type`` and ``task`` take one value or several (comma-separated
in a query, an array in a body); a type ending in ``*`` is a prefix; a task is the
dotted path of a Django ``@task`` function (its ``django.task`` jobs). ``since``
and ``until`` bound the creation time. ``search`` is a term of the admin's
search box (``core/search.py``: an id, ``args.user_id=42``, ``tenant_id:acme``).
The result is the core's ``JobFilter``, the one ``manage.py ojs`` builds too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.selection import JobFilter
from ...protocol.envelope import validate_queue_name
from ...protocol.errors import InvalidRequest
from .base import only_known, timestamp_param

FIELDS = ("state", "queue", "type", "task", "since", "until", "search")
MAX_VALUES = 100
MAX_TYPE_LENGTH = 255
MAX_SEARCH_LENGTH = 1000


def filter_from_query(params: Mapping[str, str]) -> JobFilter:
    return _job_filter({name: params[name] for name in FIELDS if params.get(name)}, split=True)


def filter_from_body(body: Mapping[str, Any], *, also: tuple[str, ...] = ()) -> JobFilter:
    """A bulk move's ``filter`` object (openapi also puts its fields beside ``confirm``: both are read).

    The body holds nothing else but ``confirm`` and the move's own fields (``also``): an empty
    filter selects every job the move may take, so a key misspelt and dropped would widen it
    to all of them."""
    only_known(body, ("filter", "confirm", *FIELDS, *also), "field")
    beside = [name for name in FIELDS if name in body]
    if "filter" in body and beside:
        raise InvalidRequest(f"filter given, and {', '.join(beside)} beside it: send the filter's fields in one place",
                             field=beside[0])
    given = body["filter"] if "filter" in body else {name: body[name] for name in FIELDS if name in body}
    if not isinstance(given, dict):
        raise InvalidRequest("filter must be an object", field="filter")
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise InvalidRequest(
            f"unknown filter fields: {', '.join(unknown)} (known: {', '.join(FIELDS)})", field=f"filter.{unknown[0]}"
        )
    return _job_filter({name: value for name, value in given.items() if value is not None}, split=False)


def _job_filter(given: Mapping[str, Any], *, split: bool) -> JobFilter:
    def values(name: str) -> list[str]:
        value = given.get(name)
        if value is None:
            return []
        items = value.split(",") if split and isinstance(value, str) else [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or len(items) > MAX_VALUES or not all(
            isinstance(item, str) and item.strip() for item in items
        ):
            raise InvalidRequest(f"{name} must be a non-empty string or a list of at most {MAX_VALUES}", field=name)
        return [item.strip() for item in items]

    types, tasks = values("type"), values("task")
    for name, given_values in (("type", types), ("task", tasks)):
        if any(len(value) > MAX_TYPE_LENGTH for value in given_values):
            raise InvalidRequest(f"a {name} has at most {MAX_TYPE_LENGTH} characters", field=name)
    search = given.get("search", "")
    if not isinstance(search, str) or len(search) > MAX_SEARCH_LENGTH:
        raise InvalidRequest(f"search must be a string of at most {MAX_SEARCH_LENGTH} characters", field="search")
    job_filter = JobFilter(
        states=values("state"),
        queues=[validate_queue_name(queue, "queue") for queue in values("queue")],
        types=types,
        tasks=tasks,
        search=search,
        created_since=timestamp_param(given.get("since"), "since"),
        created_until=timestamp_param(given.get("until"), "until"),
    )
    job_filter.selection()  # refuses an unknown state or a malformed search term now, before any work
    return job_filter
