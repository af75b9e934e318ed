"""Random sequences of the core's operations never break the state machine (Hypothesis, real database).

A rule-based machine pushes jobs and then does anything to any of them, in any
order: fetch, ack, fail (retrying or not, released or not), cancel, activate,
discard, dead-letter retry, and the reaper's moves after moving time forward.
Operations the job's state does not allow must be refused with an OJS error.
After every single call, each job's observed change is checked against the
transition table in ``states.py``: no forbidden transition, ``attempt`` never
decreasing (but for a dead-letter retry, which resets it to 0), and a history
row for every attempt that ended in failure.
"""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from typing import Any

from django.db.models import F
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_ojs.core.types import Lease
from django_ojs.models import Event, Job, JobError
from django_ojs.protocol.envelope import parse_job
from django_ojs.protocol.errors import OJSError
from django_ojs.protocol.failure import Failure
from django_ojs.protocol.states import ALLOWED_PAIRS, JobState

REAPER_BATCH = 100
# Columns that hold a moment a timer waits for; "time passes" moves them back.
TIMER_COLUMNS = ("run_at", "lease_expires_at", "deadline_at", "expires_at")
FAILED_ATTEMPT_ENDS = {JobState.RETRYABLE, JobState.DISCARDED, JobState.AVAILABLE}

queue_names = (f"prop-{n}-{uuid.uuid4().hex[:8]}" for n in itertools.count())


class JobLifecycles(RuleBasedStateMachine):
    jobs = Bundle("jobs")

    def __init__(self) -> None:
        super().__init__()
        self.queue = next(queue_names)
        self.seen: dict[Any, tuple[str, int]] = {}  # id -> (state, attempt) last observed
        self.history: dict[Any, int] = {}  # id -> error rows last observed

    # -- producing -------------------------------------------------------------------------

    @initialize(target=jobs, max_attempts=st.lists(st.integers(1, 3), min_size=3, max_size=3))
    def push_one_of_each(self, max_attempts: list[int]) -> Any:
        return multiple(*(self.push_job(start, attempts, expires=False, timeout=start == "available")
                          for start, attempts in zip(("available", "scheduled", "pending"), max_attempts)))

    @rule(
        target=jobs,
        start=st.sampled_from(["available", "scheduled", "pending"]),
        max_attempts=st.integers(1, 3),
        expires=st.booleans(),
        timeout=st.booleans(),
    )
    def push(self, start: str, max_attempts: int, expires: bool, timeout: bool) -> Any:
        return self.push_job(start, max_attempts, expires=expires, timeout=timeout)

    def push_job(self, start: str, max_attempts: int, *, expires: bool, timeout: bool) -> Any:
        options: dict[str, Any] = {"queue": self.queue, "retry": {"max_attempts": max_attempts,
                                                                  "initial_interval": "PT1S"}}
        if start == "scheduled":
            options["scheduled_at"] = "+PT1H"
        elif start == "pending":
            options["pending"] = True
        if expires:
            options["expires_at"] = "+PT2H"
        if timeout:
            options["timeout"] = 60
        job = Job.objects.push(parse_job({"type": "prop.job", "args": [], "options": options}))
        self.observe(new=job.id)
        return job.id

    # -- a worker --------------------------------------------------------------------------

    @rule(count=st.integers(1, 3), worker=st.sampled_from(["w1", "w2", None]))
    def fetch(self, count: int, worker: str | None) -> None:
        Job.objects.fetch([self.queue], count=count, worker_id=worker)
        self.observe()

    def active(self) -> list[Any]:
        return sorted(job_id for job_id, (state, _) in self.seen.items() if state == JobState.ACTIVE)

    # A worker acts on the jobs it holds (the rules below it, on any job, mostly get refusals).
    @precondition(lambda self: self.active())
    @rule(data=st.data(), stale=st.booleans())
    def ack(self, data: st.DataObject, stale: bool) -> None:
        job_id = data.draw(st.sampled_from(self.active()))
        self.call(lambda: Job.objects.ack(job_id, result={"ok": 1}, lease=self.lease(job_id, stale)))

    @precondition(lambda self: self.active())
    @rule(data=st.data(), retryable=st.booleans(), requeue=st.booleans(), stale=st.booleans())
    def fail(self, data: st.DataObject, retryable: bool, requeue: bool, stale: bool) -> None:
        job_id = data.draw(st.sampled_from(self.active()))
        failure = Failure(type="PropError", message="boom", retryable=retryable)
        self.call(lambda: Job.objects.fail(job_id, failure, lease=self.lease(job_id, stale), requeue=requeue))

    @rule(job_id=jobs)
    def ack_any(self, job_id: Any) -> None:
        self.call(lambda: Job.objects.ack(job_id))

    @rule(job_id=jobs, requeue=st.booleans())
    def fail_any(self, job_id: Any, requeue: bool) -> None:
        self.call(lambda: Job.objects.fail(job_id, Failure(type="PropError", message=""), requeue=requeue))

    # -- an operator -----------------------------------------------------------------------

    # cancel, activate a pending job, discard a waiting one, retry a dead letter (resurrect).
    @rule(job_id=jobs, move=st.sampled_from(["cancel", "activate", "discard", "resurrect"]))
    def operator(self, job_id: Any, move: str) -> None:
        self.call(lambda: getattr(Job.objects, move)(job_id))

    @rule(job_id=consumes(jobs))
    def purge(self, job_id: Any) -> None:
        """Purging a dead letter deletes it: forget it (a refused purge is checked like any refusal)."""
        self.call(lambda: Job.objects.purge_dead(job_id))
        if not Job.objects.filter(id=job_id).exists():
            del self.seen[job_id], self.history[job_id]

    # -- time and the reaper ---------------------------------------------------------------

    @rule(hours=st.sampled_from([0.001, 1.5, 3, 48]))
    def time_passes(self, hours: float) -> None:
        """Every timer of this machine's jobs comes ``hours`` closer, then the reaper does its moves."""
        delta = dt.timedelta(hours=hours)
        Job.objects.filter(queue=self.queue).update(
            **{column: F(column) - delta for column in TIMER_COLUMNS}
        )
        for move in (Job.objects.expire_overdue, Job.objects.fail_timed_out, Job.objects.requeue_lapsed,
                     Job.objects.promote_due):
            move(REAPER_BATCH)
            self.observe()

    # -- checking --------------------------------------------------------------------------

    def lease(self, job_id: Any, stale: bool) -> Lease:
        """The current holder's lease, or (``stale``) the previous attempt's."""
        _, attempt = self.seen[job_id]
        worker = Job.objects.filter(id=job_id).values_list("worker_id", flat=True).first()
        return Lease(worker_id=worker, attempt=max(attempt - 1, 1) if stale else attempt)

    def call(self, operation) -> None:
        """Run one core call; a refusal is an OJS error and changes nothing."""
        before = self.rows()
        try:
            operation()
        except OJSError:
            assert self.rows() == before, "a refused operation changed the store"
        self.observe()

    def rows(self) -> list[dict[str, Any]]:
        return list(Job.objects.filter(queue=self.queue).order_by("seq").values())

    def observe(self, new: Any = None) -> None:
        now = {row["id"]: (row["state"], row["attempt"], row["seq"])
               for row in Job.objects.filter(queue=self.queue).values("id", "state", "attempt", "seq")}
        errors: dict[int, list[int]] = {}
        for seq, attempt in JobError.objects.filter(job__queue=self.queue).values_list("job_id", "attempt"):
            errors.setdefault(seq, []).append(attempt)
        if new is not None:
            state, attempt, _ = now[new]
            assert state in ("available", "scheduled", "pending") and attempt == 0
            self.seen[new], self.history[new] = (state, attempt), 0
        for job_id, (was, was_attempt) in self.seen.items():
            if job_id not in now:
                continue  # purged
            state, attempt, seq = now[job_id]
            rows = errors.get(seq, [])
            if state != was:
                assert (JobState(was), JobState(state)) in ALLOWED_PAIRS, f"{job_id}: {was} -> {state}"
            if (was, state) == ("discarded", "available"):
                assert attempt == 0, "a dead-letter retry starts the attempts again"
            else:
                assert attempt >= was_attempt, f"{job_id}: attempt {was_attempt} -> {attempt} ({was} -> {state})"
            if was == "active" and state in FAILED_ATTEMPT_ENDS:
                assert was_attempt in rows, f"{job_id}: attempt {was_attempt} failed with no history row"
            assert len(rows) >= self.history[job_id], "error history lost rows"
            self.seen[job_id], self.history[job_id] = (state, attempt), len(rows)

    def teardown(self) -> None:
        """Leave no rows behind: every machine runs in the test's one transaction, and the
        reaper's moves would otherwise walk all earlier machines' jobs too."""
        JobError.objects.filter(job__queue=self.queue).delete()
        Event.objects.filter(queue=self.queue).delete()
        Job.objects.filter(queue=self.queue).delete()

    @invariant()
    def active_jobs_hold_a_lease(self) -> None:
        for row in Job.objects.filter(queue=self.queue, state=JobState.ACTIVE).values():
            assert row["attempt"] >= 1 and row["lease_expires_at"] is not None, row


def test_random_operations_never_make_a_forbidden_transition(db):
    run_state_machine_as_test(JobLifecycles)
