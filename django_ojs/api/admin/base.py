"""What every admin API view shares: its scopes, the confirmation of destructive moves, parameters."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from ...core.counting import Tally
from ...keys import INSPECT
from ...protocol.durations import parse_timestamp
from ...protocol.errors import InvalidRequest
from ..base import OJSView


class AdminView(OJSView):
    """Reads need ``read`` or ``admin`` (``keys.INSPECT``); every other method ``admin``
    (``auth.check_scope``'s default for a method the mapping does not name).

    ``query``: the query parameters the view reads, by method; any other is refused. A misspelt
    filter (``?status=discarded``) left out would answer every job as if it were the filtered
    list, and an alert counting it would count them all."""

    required_scope: str | dict[str, str] = {"GET": INSPECT}
    query: Mapping[str, Collection[str]] = {}

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        only_known(request.query_params, self.query.get(request.method, ()), "query parameter")


def only_known(given: Iterable[str], known: Collection[str], what: str) -> None:
    """Refuse any name of ``given`` (a query's parameters, a body's keys) not ``known``."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        listed = f" (known: {', '.join(sorted(known))})" if known else " (it reads none)"
        raise InvalidRequest(f"unknown {what}: {', '.join(unknown)}{listed}", field=unknown[0])


def confirmed(body: Mapping[str, Any]) -> None:
    """ojs-admin-api §4.4: a destructive move runs only with ``"confirm": true`` in its body."""
    if body.get("confirm") is not True:
        raise InvalidRequest(
            'this operation changes or deletes jobs for good: send "confirm": true to proceed',
            field="confirm",
        )


def timestamp_param(value: Any, name: str) -> dt.datetime | None:
    """An optional RFC 3339 timestamp (a query parameter or a body field)."""
    if value is None or value == "":
        return None
    try:
        parsed = parse_timestamp(value, allow_relative=False)
    except ValueError as exc:
        raise InvalidRequest(f"{name} {exc}", field=name) from None
    assert isinstance(parsed, dt.datetime)  # relative times refused above
    return parsed


def rendered_counts(tallies: Mapping[str, Tally]) -> tuple[dict[str, int], list[str]]:
    """Counts by state as numbers, and the states whose count is the planner's estimate (``core/counting.py``)."""
    return (
        {state: tally.value for state, tally in tallies.items()},
        [state for state, tally in tallies.items() if not tally.exact],
    )
