"""What an admin action did, told in one message: "n done, m skipped because …".

Actions apply a core operation to each selected row. A row the operation
refuses (wrong state, gone meanwhile, not worth doing) is skipped with a
reason; reasons are grouped so that a thousand rows make one readable line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.http import HttpRequest

# The most rows one action run touches: each is its own transaction through
# the core, and a request must finish in seconds, not minutes.
ACTION_LIMIT = 1_000


@dataclass
class Outcome:
    """Done count and skip reasons of one action run."""

    label: str
    done_objects: list[Any] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    # Which rows the operation can take, said once after the reasons when
    # the core refused a row for its state.
    hint: str = ""
    refused: bool = False
    not_processed: bool = False
    # How many selected rows the action found to work on.
    found: int = 0

    @property
    def done(self) -> int:
        return len(self.done_objects)

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def refuse(self, state: str) -> None:
        """The core refused the row: it is in ``state``, which the operation cannot leave."""
        self.skip(state)
        self.refused = True

    @property
    def message(self) -> str:
        text = f"{self.label}: {self.done} done"
        total = sum(self.skipped.values())
        if total:
            reasons = ", ".join(f"{reason} ({count})" for reason, count in self.skipped.most_common())
            text += f", {total} skipped because: {reasons}."
            if self.hint and self.refused:
                text += f" {self.hint}"
        else:
            text += "."
        if self.not_processed:
            text += (
                f" Only the first {ACTION_LIMIT:,} selected rows were processed;"
                " run the action again for the rest."
            )
        return text

    def send(self, request: HttpRequest, action_flag: int = CHANGE) -> None:
        """Record the done rows in the admin log, and report to the operator.

        A success message, or a warning when anything was skipped or left out.
        """
        if self.done_objects:
            LogEntry.objects.log_actions(
                user_id=request.user.pk,
                queryset=self.done_objects,
                action_flag=action_flag,
                change_message=f"{self.label} (admin action)",
            )
        level = messages.WARNING if self.skipped or self.not_processed else messages.SUCCESS
        messages.add_message(request, level, self.message)


def note_missing(request: HttpRequest, found: int, outcome: Outcome, reason: str) -> None:
    """Count ticked rows the action's queryset no longer holds (changed or gone since the page loaded).

    Django runs an action on the ticked rows that still match the list, so a
    row that left it meanwhile would otherwise vanish from the report.
    """
    if request.POST.get("select_across") == "1":
        return
    ticked = len(set(request.POST.getlist("_selected_action")))
    for _ in range(max(ticked - found, 0)):
        outcome.skip(reason)


def within_limit(values: list, outcome: Outcome) -> list:
    """The first ``ACTION_LIMIT`` of ``values`` (fetched with one extra to tell)."""
    outcome.found = len(values)
    if len(values) > ACTION_LIMIT:
        outcome.not_processed = True
    return values[:ACTION_LIMIT]


def apply_to_each(
    request: HttpRequest, rows: Any, outcome: Outcome, act: Any, *, skipped: str, missing: str
) -> None:
    """Run the core operation ``act`` on each row and report.

    ``act`` returns the changed object (or True for the row itself) when it
    did something, and something falsy when there was nothing to do, which
    is counted as skipped for ``skipped``.
    """
    rows = list(rows)
    note_missing(request, len(rows), outcome, missing)
    for row in rows:
        changed = act(row)
        if changed:
            outcome.done_objects.append(row if changed is True else changed)
        else:
            outcome.skip(skipped)
    outcome.send(request)
