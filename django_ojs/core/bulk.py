"""Operator moves on every job a filter matches, in bounded batches (the CLI, the admin).

A filter may match millions of jobs; one UPDATE over all of them would hold
a million row locks for minutes and block every worker that touches one.
Instead the rows are walked in ``seq`` order, ``BATCH_SIZE`` at a time, each
batch its own short transaction:

1. read the next batch's ``seq`` values from the selection (no lock), past
   the last one seen (keyset paging: each batch starts where the last one
   ended, whether its rows moved or not);
2. lock those rows that are still in a state the move may leave, in ``seq``
   order, ``FOR UPDATE SKIP LOCKED``: a row a worker or the reaper holds
   right now is skipped, never waited for, so a bulk move cannot deadlock
   with them (DESIGN invariant 11) and never holds more than a batch;
3. write the move to the locked rows (the same columns as the one-job move
   in ``control.py``) and record its events in the same transaction.

Rows counted as skipped are reported by reason: the state they moved to
meanwhile, "busy" (locked by someone else), "gone", or a unique key held
by a live job (a dead letter retry), with the first ``SKIPPED_SAMPLE`` of
them by ``seq``. Running the move again takes them up.
The selection is re-checked under the lock for its state only: the other
attributes a filter can name (queue, type, args, meta) do not change.
"""

from __future__ import annotations

import copy
import functools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from ..models import Job, JobError
from ..protocol.states import TERMINAL, JobState, Move, sources, target
from . import events
from .clock import db_now
from .durable import forget_steps
from .moves import cancel_changes, discard_changes, resurrect_changes
from .row_movement import retried
from .workflows import advance as advance_workflows

BATCH_SIZE = 1_000
# Skipped rows named in the report, by seq: enough to look into, never the whole selection.
SKIPPED_SAMPLE = 100
BUSY = "busy"
GONE = "gone"
UNIQUE_HELD = "unique key held by a live job"


@dataclass
class BulkReport:
    """What one bulk move did: rows moved, rows skipped by reason, batches run."""

    move: str
    moved: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    batches: int = 0
    # (seq, reason) of the first SKIPPED_SAMPLE rows skipped.
    skipped_rows: list[tuple[int, str]] = field(default_factory=list)
    # Why the walk stopped with rows left to see: "limit" or "time budget"; "" = it saw them all.
    stopped_at: str = ""

    @property
    def truncated(self) -> bool:
        return bool(self.stopped_at)

    def skip(self, seq: int, reason: str) -> None:
        self.skipped[reason] += 1
        if len(self.skipped_rows) < SKIPPED_SAMPLE:
            self.skipped_rows.append((seq, reason))

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "move": self.move,
            "moved": self.moved,
            "skipped": self.skipped_total,
            "skipped_by_reason": dict(self.skipped.most_common()),
            "batches": self.batches,
            "truncated": self.truncated,
            "stopped_at": self.stopped_at or None,
        }


# A batch applier: moves the locked rows, given as (seq, state, unique_key),
# and counts them (moved or skipped) in the report.
Apply = Callable[[Any, list[tuple[int, str, str | None]], BulkReport], None]


@dataclass(frozen=True)
class BulkMove:
    name: str
    # The states the move may leave: the selection is narrowed to them.
    allowed: frozenset[JobState]
    apply: Apply


def _retry(manager: Any, rows: list[tuple[int, str, str | None]], report: BulkReport) -> None:
    now = db_now()
    plain = [seq for seq, _, key in rows if key is None]
    changes = {"state": target(Move.RESURRECT), **resurrect_changes(now)}
    moved = list(plain)
    if plain:
        manager.filter(seq__in=plain).update(**changes)
    # A job with a unique key may collide with a live holder of the same key
    # as it re-enters its holding set: each goes alone under a savepoint, and
    # a collision skips it (the one-job retry reports it as a duplicate).
    for seq, _, key in rows:
        if key is None:
            continue
        try:
            with transaction.atomic():
                manager.filter(seq=seq).update(**changes)
        except IntegrityError:
            report.skip(seq, UNIQUE_HELD)
        else:
            moved.append(seq)
    report.moved += len(moved)
    _record(manager, "job.enqueued", moved, now, retried_from_dead_letter=True)


def _cancel(manager: Any, rows: list[tuple[int, str, str | None]], report: BulkReport) -> None:
    now = db_now()
    seqs = [seq for seq, _, _ in rows]
    manager.filter(seq__in=seqs).update(state=target(Move.CANCEL), **cancel_changes(now))
    report.moved += len(seqs)
    # Rows locked first (seq order), workflows after: the settle paths' lock order.
    advance_workflows(dict.fromkeys(seqs, JobState.CANCELLED))
    # The event names the state each job left (as the one-job cancel does).
    by_previous: dict[str, list[int]] = {}
    for seq, state, _ in rows:
        by_previous.setdefault(state, []).append(seq)
    for previous, group in sorted(by_previous.items()):
        _record(manager, "job.cancelled", group, now, previous_state=previous)


def _discard(manager: Any, rows: list[tuple[int, str, str | None]], report: BulkReport) -> None:
    seqs = [seq for seq, _, _ in rows]
    manager.filter(seq__in=seqs).update(state=target(Move.DISCARD), **discard_changes(db_now()))
    report.moved += len(seqs)
    # Rows locked first (seq order), workflows after: the settle paths' lock order.
    advance_workflows(dict.fromkeys(seqs, JobState.DISCARDED))


def _activate(manager: Any, rows: list[tuple[int, str, str | None]], report: BulkReport) -> None:
    now = db_now()
    seqs = [seq for seq, _, _ in rows]
    manager.filter(seq__in=seqs).update(state=target(Move.ACTIVATE), enqueued_at=now)
    report.moved += len(seqs)
    _record(manager, "job.enqueued", seqs, now, activated=True)


def _delete(manager: Any, rows: list[tuple[int, str, str | None]], report: BulkReport) -> None:
    seqs = [seq for seq, _, _ in rows]
    JobError.objects.filter(job_id__in=seqs).delete()
    forget_steps(seqs)
    events.forget_jobs(manager.filter(seq__in=seqs).values_list("id", flat=True))
    manager.filter(seq__in=seqs).delete()
    report.moved += len(seqs)


def _record(manager: Any, kind: str, seqs: list[int], now: Any, **data: Any) -> None:
    """One ``kind`` event per moved job, with ``data`` added to each."""
    events.record_for_jobs(
        kind,
        seqs,
        now,
        lambda: [events.job_event(kind, job, now, **data) for job in manager.filter(seq__in=seqs).order_by("seq")],
        data=data,
    )


MOVES: dict[str, BulkMove] = {
    move.name: move
    for move in (
        BulkMove("retry", sources(Move.RESURRECT), _retry),
        BulkMove("purge", frozenset({JobState.DISCARDED}), _delete),
        # ojs-admin-api §8.3: any finished job (the dead letter's purge is the discarded ones).
        BulkMove("delete", TERMINAL, _delete),
        BulkMove("cancel", sources(Move.CANCEL), _cancel),
        BulkMove("discard", sources(Move.DISCARD), _discard),
        BulkMove("activate", sources(Move.ACTIVATE), _activate),
    )
}


def movable(selection: QuerySet, name: str) -> QuerySet:
    """The rows of ``selection`` the move ``name`` may take now (for counts and dry runs)."""
    return selection.filter(state__in=sorted(MOVES[name].allowed))


def bulk_move(
    selection: QuerySet,
    name: str,
    *,
    batch_size: int = BATCH_SIZE,
    limit: int | None = None,
    time_budget: float | None = None,
    on_batch: Callable[[BulkReport], None] | None = None,
) -> BulkReport:
    """Apply the move ``name`` to every job of ``selection`` it may take, batch by batch.

    ``limit`` caps the rows looked at (moved or skipped); ``time_budget``
    (seconds) stops the walk between batches once spent, so a web request
    answers in time (what is done stays done; running again goes on);
    ``on_batch`` is told the report after each committed batch (progress).
    """
    move = MOVES[name]
    manager = Job.objects
    report = BulkReport(name)
    candidates = movable(selection, name).order_by("seq").values_list("seq", flat=True)
    deadline = None if time_budget is None else time.monotonic() + time_budget
    cursor = 0
    while True:
        size = batch_size if limit is None else min(batch_size, limit - report.moved - report.skipped_total)
        # At least one batch per run, however small the budget: every run gets somewhere.
        spent = deadline is not None and report.batches > 0 and time.monotonic() >= deadline
        stop = "limit" if size <= 0 else "time budget" if spent else ""
        if stop:
            if candidates.filter(seq__gt=cursor).exists():
                report.stopped_at = stop
            break
        seqs = list(candidates.filter(seq__gt=cursor)[:size])
        if not seqs:
            break
        cursor = seqs[-1]
        report = retried(functools.partial(_move_batch_afresh, manager, move, seqs, report))
        report.batches += 1
        if on_batch is not None:
            on_batch(report)
    return report


def _move_batch_afresh(manager: Any, move: BulkMove, seqs: list[int], before: BulkReport) -> BulkReport:
    return _move_batch(manager, move, seqs, copy.deepcopy(before))


def _move_batch(manager: Any, move: BulkMove, seqs: list[int], report: BulkReport) -> BulkReport:
    """One batch in one transaction, counted on ``report`` (a copy: a batch run again after it
    met a moved row, ``core/row_movement.py``, counts from where the last batch left it)."""
    allowed = sorted(move.allowed)
    with transaction.atomic():
        # By seq alone, the states sorted out once locked: a state condition here let
        # PostgreSQL walk an index of every finished job per batch when its statistics
        # predate the backlog (tests/core/test_query_plans.py).
        held = list(
            manager.filter(seq__in=seqs)
            .order_by("seq")
            .select_for_update(skip_locked=True, of=("self",))
            .values_list("seq", "state", "unique_key")
        )
        locked = [row for row in held if row[1] in allowed]
        for seq, state, _ in held:
            if state not in allowed:
                report.skip(seq, state)
        if len(held) < len(seqs):
            _count_left_out(manager, set(seqs) - {row[0] for row in held}, move, report)
        if locked:
            move.apply(manager, locked, report)
    return report


def _count_left_out(manager: Any, seqs: set[int], move: BulkMove, report: BulkReport) -> None:
    """Say why rows of the batch were not locked: another state now, gone, or locked by someone."""
    states = dict(manager.filter(seq__in=sorted(seqs)).values_list("seq", "state"))
    for seq in sorted(seqs):
        state = states.get(seq)
        if state is None:
            report.skip(seq, GONE)
        elif JobState(state) in move.allowed:
            report.skip(seq, BUSY)
        else:
            report.skip(seq, state)
