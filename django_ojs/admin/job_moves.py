"""The operator's moves on jobs, each one call into the core per selected job.

The core decides: a move it refuses raises ``InvalidTransition`` (the job is
in another state now) or ``NotFound`` (it is gone, or not in the dead
letter), and the action counts the row as skipped with the job's state as
the reason. Nothing here reads a state and then writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.contrib.admin.models import CHANGE, DELETION
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from ..core import control
from ..models import Job
from ..protocol.errors import InvalidTransition, NotFound
from ..protocol.states import STATE_ORDER, JobState, Move, sources
from . import bulk_actions
from .confirm import CONFIRMED_FIELD, confirmation_page
from .outcome import ACTION_LIMIT, Outcome, note_missing, within_limit

GONE = "no longer exists"


@dataclass(frozen=True)
class JobMove:
    """An admin action that applies one core operation to each selected job."""

    name: str
    label: str
    description: str
    # The states the move may leave, for the hint in the skip message.
    allowed: frozenset[JobState]
    past_tense: str
    # Applies the move to one job id; returns None when done, or the state
    # of a job the core left alone without raising (cancel is idempotent).
    apply: Callable[[Any], str | None]
    # How the admin log records a done row.
    log_flag: int = CHANGE
    # Set for moves that cannot be undone: the action first asks, saying this.
    confirm_warning: str = ""
    # The same move in core/bulk.py, for "everything this filter matches".
    bulk_name: str = ""
    # The permission the action needs (the page's ``has_<permission>_permission``):
    # ``change`` for a move between states, ``purge`` for a deletion.
    permission: str = "change"

    @property
    def hint(self) -> str:
        names = [state.value for state in STATE_ORDER if state in self.allowed]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        return f"Only {listed} jobs can be {self.past_tense}."

    def run(self, queryset: QuerySet) -> Outcome:
        outcome = Outcome(self.label, hint=self.hint)
        # The rows as selected, for the admin log; the core re-reads each one.
        jobs = within_limit(list(queryset.only("seq", "id", "type", "state")[: ACTION_LIMIT + 1]), outcome)
        for job in jobs:
            try:
                left_alone = self.apply(job.id)
            except InvalidTransition as refused:
                _count_refusal(outcome, refused.current_state)
            except NotFound:
                # Gone, or (purge, dead letter retry) no longer discarded: say which.
                _count_refusal(outcome, _state_of(job.id))
            else:
                if left_alone:
                    outcome.refuse(left_alone)
                else:
                    outcome.done_objects.append(job)
        return outcome

    def as_admin_action(self) -> Callable:
        """A ModelAdmin action running this move; it needs the model's ``permission``."""

        def action(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
            if bulk_actions.whole_filter_chosen(request):
                # "Select all N" ticked: every matching job, in batches through the core.
                return bulk_actions.act(modeladmin, request, queryset, self)
            if self.confirm_warning and request.POST.get(CONFIRMED_FIELD) != self.name:
                return confirmation_page(modeladmin, request, queryset, self.label, self.confirm_warning, self.name)
            outcome = self.run(queryset)
            note_missing(request, outcome.found, outcome, getattr(modeladmin, "missing_reason", GONE))
            outcome.send(request, self.log_flag)
            return None

        action.__name__ = self.name
        return admin.action(description=self.description, permissions=[self.permission])(action)


def _count_refusal(outcome: Outcome, state: str | None) -> None:
    if state:
        outcome.refuse(state)
    else:
        outcome.skip(GONE)


def _state_of(job_id: Any) -> str | None:
    return Job.objects.filter(id=job_id).values_list("state", flat=True).first()


def _cancel(job_id: Any) -> str | None:
    job, left = control.cancel(job_id)
    return job.state if left is None else None


def _call(operation: Callable[[Any], Any]) -> Callable[[Any], None]:
    def apply(job_id: Any) -> None:
        operation(job_id)

    return apply


CANCEL = JobMove(
    "cancel_jobs", "Cancel", "Cancel selected jobs", sources(Move.CANCEL), "cancelled", _cancel, bulk_name="cancel"
)
ACTIVATE = JobMove(
    "activate_jobs",
    "Activate",
    "Activate selected pending jobs",
    sources(Move.ACTIVATE),
    "activated",
    _call(control.activate),
    bulk_name="activate",
)
RETRY = JobMove(
    "retry_jobs",
    "Retry",
    "Retry selected failed jobs",
    sources(Move.RESURRECT),
    "retried",
    _call(control.resurrect),
    bulk_name="retry",
)
DISCARD = JobMove(
    "discard_jobs",
    "Discard",
    "Discard selected waiting jobs",
    sources(Move.DISCARD),
    "discarded",
    _call(control.discard),
    bulk_name="discard",
)
PURGE = JobMove(
    "purge_jobs",
    "Purge",
    "Purge selected failed jobs for good (asks for confirmation)",
    frozenset({JobState.DISCARDED}),
    "purged",
    _call(control.purge_dead),
    log_flag=DELETION,
    confirm_warning=(
        "Purged jobs -- dead letters and discarded jobs alike -- are deleted for good with their error "
        "history and their events: this cannot be undone."
    ),
    bulk_name="purge",
    permission="purge",
)


def moves_from(state: str, moves: Iterable[JobMove]) -> list[JobMove]:
    """The moves a job in ``state`` can take now: the buttons on its page."""
    return [move for move in moves if JobState(state) in move.allowed]
