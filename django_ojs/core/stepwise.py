"""The stepwise engine: it declines every one-statement path, so every operation runs its ORM steps.

The base of the PostgreSQL engine (``core/pg/engine.py``), which overrides
each method with its statement; ``core/engine.py`` says which runs and
lists each method beside its stepwise twin.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..protocol.envelope import JobSpec
from .types import ClaimOutcome, Lease, Settlement, TurnOutcome

if TYPE_CHECKING:
    from ..models import Job
    from .fairness import Turns


class StepwiseEngine:
    """The stepwise engine: every answer is "do it in steps"."""

    name = "stepwise"

    def push_plain(self, specs: Sequence[JobSpec], chosen_ids: list[Any]) -> list[Job] | None:
        """Store ``specs`` if none needs deciding before the insert; the stored jobs, or None."""
        return None

    def claim_queue(
        self,
        queue: str,
        count: int,
        worker_id: str | None,
        visibility_timeout: dt.timedelta | None,
        *,
        hold: bool,
        types: Sequence[str] | None = None,
        turns: Turns | None = None,
    ) -> ClaimOutcome | None:
        """Claim from one queue (jobs of ``types`` only, when given); None when its claim is left to
        the steps (a limited queue, this engine). ``turns``: a fair queue's values served are gathered
        there, for the caller to write, rather than written by the claim."""
        return None

    def turn(
        self,
        worker_id: str,
        settlements: Sequence[Settlement],
        queues: Sequence[str],
        count: int,
        types: Sequence[str] | None = None,
    ) -> TurnOutcome | None:
        """A worker's whole turn outside a transaction; None when the batch needs deciding row by row."""
        return None

    def ack_alone(self, job_id: Any, result: Any, lease: Lease) -> Job | None:
        """ACK outside any transaction, as one of its own, a job that is no workflow step (whose
        workflow must move in the ACK's transaction); None: the operation acks in a transaction."""
        return None

    def ack(self, job_id: Any, result: Any, lease: Lease) -> Job | None:
        """ACK inside the operation's transaction, or raise the refusal; None: the steps do it."""
        return None

    def lock_settled(self, job_ids: Sequence[str], *, holding: str | None) -> tuple[bool, list[tuple]] | None:
        """Lock a batch's rows for ``settle_many``: (whether ``holding`` is alive, the rows); None: the ORM does."""
        return None

    def complete_rows(
        self, seqs: Sequence[int], results: Sequence[Any], now: dt.datetime, labels: list[tuple[str, str]]
    ) -> bool:
        """Complete rows ``settle_many`` locked and checked; False: the ORM does."""
        return False

    def record_job_events(
        self, kind: str, seqs: list[int], time: dt.datetime, data: dict[str, Any], *, with_duration: bool,
        live: bool = False,
    ) -> bool:
        """Record one event per job from its row (``live``: a row in a live state); False: the caller
        builds them in Python."""
        return False

    def queues_with_work(self, names: list[str], types: Sequence[str] | None = None) -> list[str]:
        """The queues among ``names`` worth probing (for jobs of ``types``, when given), in order:
        here all of them."""
        return names
