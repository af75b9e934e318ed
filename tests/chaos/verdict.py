"""The verdict of a chaos run: what the store, the handlers' records and PostgreSQL's log say.

``read_store`` takes a snapshot of the rows (plain SQL, so the checking
process needs no Django settings of its own); ``judge`` is pure: from the
snapshot, what the driver did, and the database log, it lists every
violation with its evidence and the run's figures.

What the driver did explains some things and nothing else: a worker it
killed, or froze past the heartbeat timeout, may be declared dead and have
its jobs re-run; a worker it sent SIGTERM may hand its running jobs back.
Every other death, lease lost, re-run or double run is the system's fault.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from .plan import HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT, KINDS, QUEUE, SNOOZES, expected_result

OPEN_STATES = ("available", "active", "retryable", "scheduled", "pending")
# Errors the chaos causes (as opposed to the handlers' own).
CHAOS_ERRORS = frozenset({"worker_death", "visibility_timeout", "ShutdownError"})
# Slack between the driver's clock and the database's (same machine) and for a
# reaper pass that began just before a SIGCONT.
SLACK = 1.0
SAMPLES = 8


@dataclass(frozen=True)
class JobRow:
    id: str
    type: str
    args: list[Any]
    state: str
    attempt: int
    max_attempts: int
    releases: int
    result: Any
    snoozes: int = 0


@dataclass(frozen=True)
class ErrorRow:
    job_id: str
    attempt: int
    type: str
    at: float


@dataclass(frozen=True)
class ExecutionRow:
    job_id: str
    attempt: int
    worker_id: str
    pid: int
    started_at: float
    finished_at: float | None


@dataclass(frozen=True)
class WorkerEvent:
    worker_id: str
    at: float


@dataclass
class Store:
    jobs: list[JobRow]
    errors: list[ErrorRow]
    executions: list[ExecutionRow]
    # (job id, attempt) -> (worker id, claimed at), from the job.started events.
    claims: dict[tuple[str, int], tuple[str | None, float]]
    deaths: list[WorkerEvent]
    registrations: list[WorkerEvent]
    # (job id, attempt) of the attempts that ended parked -- snoozed or waiting for a
    # signal (job.snoozed, job.waiting): they re-run with no error, by design.
    parks: set[tuple[str, int]] = field(default_factory=set)


def _epoch(value: dt.datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def read_store(conn: Any) -> Store:
    """Everything the verdict reads, from a psycopg connection to the run's database."""
    jobs = [
        JobRow(str(id_), type_, args, state, attempt, max_attempts, releases, result, snoozes)
        for id_, type_, args, state, attempt, max_attempts, releases, result, snoozes in conn.execute(
            "SELECT id, type, args, state, attempt, max_attempts, releases, result, snoozes FROM django_ojs_job "
            "WHERE queue = %s",
            [QUEUE],
        )
    ]
    errors = [
        ErrorRow(str(job_id), attempt, type_, _epoch(at))
        for job_id, attempt, type_, at in conn.execute(
            "SELECT j.id, e.attempt, e.type, e.occurred_at FROM django_ojs_joberror e "
            "JOIN django_ojs_job j ON j.seq = e.job_id WHERE j.queue = %s",
            [QUEUE],
        )
    ]
    executions = [
        ExecutionRow(str(job_id), attempt, worker_id, pid, _epoch(started), _epoch(finished))
        for job_id, attempt, worker_id, pid, started, finished in conn.execute(
            "SELECT job_id, attempt, worker_id, pid, started_at, finished_at FROM ojs_chaos_execution"
        )
    ]
    claims = {
        (str(job_id), int(attempt)): (worker_id, _epoch(at))
        for job_id, attempt, worker_id, at in conn.execute(
            "SELECT job_id, attempt, data->>'worker_id', time FROM django_ojs_event "
            "WHERE type = 'job.started' AND queue = %s",
            [QUEUE],
        )
    }
    deaths = [
        WorkerEvent(worker_id, _epoch(at))
        for worker_id, at in conn.execute(
            "SELECT data->>'worker_id', time FROM django_ojs_event "
            "WHERE type = 'worker.stopped' AND data->>'reason' = 'dead'"
        )
    ]
    registrations = [
        WorkerEvent(worker_id, _epoch(at))
        for worker_id, at in conn.execute(
            "SELECT data->>'worker_id', time FROM django_ojs_event WHERE type = 'worker.started'"
        )
    ]
    parks = {
        (str(job_id), int(attempt))
        for job_id, attempt in conn.execute(
            "SELECT job_id, attempt FROM django_ojs_event "
            "WHERE type IN ('job.snoozed', 'job.waiting') AND queue = %s",
            [QUEUE],
        )
    }
    return Store(jobs, errors, executions, claims, deaths, registrations, parks)


@dataclass(frozen=True)
class Intervention:
    """Something the driver did to a worker process (or saw happen to it)."""

    worker_id: str
    kind: str  # SIGKILL, SIGTERM, SIGSTOP, SIGCONT, exit
    at: float


class Interventions:
    """What the driver did to each worker id, to tell an explained death from a false one."""

    def __init__(self, items: list[Intervention]):
        self.by_worker: dict[str, list[Intervention]] = defaultdict(list)
        for item in sorted(items, key=lambda item: item.at):
            self.by_worker[item.worker_id].append(item)

    def known(self, worker_id: str | None) -> bool:
        return worker_id in self.by_worker

    def explains_death(self, worker_id: str | None, at: float) -> str | None:
        """Why the worker could fairly be declared dead at ``at``: killed, frozen, or gone; else None.

        Only an act early enough explains a death: the reaper needs a whole
        heartbeat timeout of silence, and the worker's last beat before the
        act was at most one interval before it. A death sooner after the act
        means the worker had fallen silent before it. A thawed worker beats
        at once, so a death long after its SIGCONT is not the freeze's either.
        """
        latest_act = at - (HEARTBEAT_TIMEOUT - HEARTBEAT_INTERVAL - SLACK)
        frozen_since = None
        for item in self.by_worker.get(worker_id, []):
            if item.at > latest_act:
                break
            if item.kind in ("SIGKILL", "exit"):
                return "killed" if item.kind == "SIGKILL" else "exited"
            if item.kind == "SIGSTOP":
                frozen_since = item.at
            elif item.kind == "SIGCONT" and frozen_since is not None:
                if at <= item.at + HEARTBEAT_INTERVAL + SLACK:
                    return "frozen"
                frozen_since = None
        return "frozen" if frozen_since is not None else None

    def history(self, worker_id: str | None, until: float) -> str:
        """What was done to the worker up to ``until``, for evidence."""
        done = [
            f"{item.kind} at {_clock(item.at)}"
            for item in self.by_worker.get(worker_id, [])
            if item.at <= until
        ]
        return ", ".join(done) or "nothing"

    def explains_lost_attempt(self, worker_id: str | None, at: float) -> str | None:
        """Why a job held by this worker could fairly be taken from it at ``at``."""
        reason = self.explains_death(worker_id, at)
        if reason:
            return reason
        terminated = any(
            i.kind == "SIGTERM" and i.at <= at + SLACK for i in self.by_worker.get(worker_id, [])
        )
        return "terminated" if terminated else None


@dataclass
class Check:
    name: str
    description: str
    evidence: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.evidence)

    @property
    def passed(self) -> bool:
        return not self.evidence


@dataclass
class Verdict:
    checks: list[Check]
    figures: dict[str, Any]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def violations(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]

    def render(self) -> str:
        lines = ["figures:"]
        width = max(map(len, self.figures), default=0)
        lines += [f"  {name:<{width}}  {value}" for name, value in self.figures.items()]
        lines.append("checks:")
        for check in self.checks:
            status = "ok" if check.passed else f"FAILED ({check.count})"
            lines.append(f"  {status:<12} {check.description}")
            for line in check.evidence[:SAMPLES]:
                lines.append(f"      {line}")
            if check.count > SAMPLES:
                lines.append(f"      ... and {check.count - SAMPLES} more")
        lines.append(
            "verdict: "
            + (
                "PASSED"
                if self.passed
                else "FAILED: " + ", ".join(f"{check.name} {check.count}" for check in self.violations())
            )
        )
        return "\n".join(lines)


# -- the PostgreSQL log --------------------------------------------------------------------

_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d [\d:.]+) UTC \[(\d+)\] (\w+):\s+(.*)$")
_BEAT_WORKER = re.compile(r'SET "lease_expires_at" = .*?"worker_id" = \'([^\']+)\'')


@dataclass
class Deadlock:
    at: float
    detail: str = ""
    statement: str = ""

    @property
    def beat_of(self) -> str | None:
        """The worker whose heartbeat was the victim, if it was one."""
        match = _BEAT_WORKER.search(self.statement)
        return match.group(1) if match else None

    def describe(self) -> str:
        others = re.findall(r"Process \d+: (.*)", self.detail)
        kinds = sorted({_statement_kind(sql) for sql in others})
        victim = _statement_kind(self.statement)
        return f"{_clock(self.at)}: victim {victim!r}; the cycle: {' / '.join(kinds) or 'unknown'}"


def deadlocks(log: str) -> list[Deadlock]:
    """Each "deadlock detected" in a PostgreSQL log (``log_line_prefix = '%m [%p] '``, UTC)."""
    found: list[Deadlock] = []
    current: Deadlock | None = None  # the deadlock whose lines are being read, and its backend
    backend = field_name = ""
    for line in log.splitlines():
        match = _LOG_LINE.match(line)
        if match is None:  # a continuation line of the previous message
            if current is not None and field_name:
                setattr(current, field_name, getattr(current, field_name) + "\n" + line.strip())
            continue
        stamp, pid, level, message = match.groups()
        field_name = ""
        if level == "ERROR" and message.startswith("deadlock detected"):
            at = dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.UTC)
            current, backend = Deadlock(at.timestamp()), pid
            found.append(current)
        elif current is not None and pid == backend and level in ("DETAIL", "STATEMENT"):
            field_name = level.lower()
            setattr(current, field_name, message)
            if level == "STATEMENT":
                current = None  # the last line of the report
    return found


def _statement_kind(sql: str) -> str:
    """Which transaction of the job store a statement belongs to, to say what deadlocked."""
    compact = " ".join(sql.split())
    job = '"django_ojs_job"'
    if compact.startswith(f'UPDATE {job} SET "lease_expires_at"'):
        return "BEAT lease extension"
    if compact.startswith("SELECT") and compact.endswith("FOR UPDATE"):
        if f'{job}."id" = ' in compact:
            return "FAIL row lock"
        if f'{job}."id" IN' in compact:
            return "ACK batch lock"
        if f'{job}."worker_id" IN' in compact:
            return "dead-worker recovery lock"
    return compact[:80]


# -- judging -------------------------------------------------------------------------------


def judge(
    store: Store,
    *,
    planned: int,
    interventions: Interventions,
    postgres_log: str,
    unexpected_exits: list[str],
    figures: dict[str, Any] | None = None,
) -> Verdict:
    jobs = {job.id: job for job in store.jobs}
    found_deadlocks = deadlocks(postgres_log)
    dead_at_claim = _claims_while_dead(store)
    errors: dict[tuple[str, int], list[ErrorRow]] = defaultdict(list)
    for error in store.errors:
        errors[(error.job_id, error.attempt)].append(error)
    runs: dict[tuple[str, int], list[ExecutionRow]] = defaultdict(list)
    for run in store.executions:
        runs[(run.job_id, run.attempt)].append(run)
    by_job: dict[str, list[ExecutionRow]] = defaultdict(list)
    for run in store.executions:
        by_job[run.job_id].append(run)

    checks = [
        _open_jobs(store),
        _lost(store, planned),
        _outcomes(store),
        _double_runs(runs),
        _unexplained_reruns(jobs, runs, errors, store.parks),
        _snoozes(store),
        Check(
            "deadlocks",
            'no "deadlock detected" in the PostgreSQL log',
            [d.describe() for d in found_deadlocks],
        ),
        _false_deaths(store, interventions, found_deadlocks),
        _stuck(store, interventions, dead_at_claim),
        Check("unexpected_exits", "no process exited unless the driver stopped it", list(unexpected_exits)),
    ]
    avoidable, overlapping = _avoidable_reruns(store, by_job, interventions)
    counts = Counter(job.state for job in store.jobs)
    out = {
        "jobs planned / stored": f"{planned} / {len(store.jobs)}",
        "jobs by state": ", ".join(f"{state} {count}" for state, count in sorted(counts.items())),
        "executions": len(store.executions),
        "errors by type": ", ".join(
            f"{t} {n}" for t, n in Counter(e.type for e in store.errors).most_common()
        ),
        **(figures or {}),
        "lost jobs": _check(checks, "lost").count,
        "double runs": _check(checks, "double_runs").count,
        "unexplained re-runs": _check(checks, "unexplained_reruns").count,
        "snoozes / parked attempts": f"{sum(job.snoozes for job in store.jobs)} / {len(store.parks)}",
        "avoidable re-runs": avoidable,
        "re-runs while the earlier run was still going": overlapping,
        "deadlocks": _check(checks, "deadlocks").count,
        "false deaths": _check(checks, "false_deaths").count,
        "jobs stuck until the visibility timeout": _check(checks, "stuck").count,
        "claims by a worker already declared dead": len(dead_at_claim),
    }
    return Verdict(checks, out)


def _check(checks: list[Check], name: str) -> Check:
    return next(check for check in checks if check.name == name)


def _open_jobs(store: Store) -> Check:
    check = Check("open_jobs", f"no job left {'/'.join(OPEN_STATES)}")
    for job in store.jobs:
        if job.state in OPEN_STATES:
            check.evidence.append(f"job {job.id} ({job.type}) is {job.state}, attempt {job.attempt}")
    return check


def _lost(store: Store, planned: int) -> Check:
    check = Check("lost", "every planned job is in the store")
    indexes = {job.args[1] for job in store.jobs}
    check.evidence = [
        f"job #{index} of the plan is missing" for index in range(planned) if index not in indexes
    ]
    return check


def _outcomes(store: Store) -> Check:
    check = Check("outcomes", "every job ended as its handler dictates")
    error_types: dict[str, set[str]] = defaultdict(set)
    for error in store.errors:
        error_types[error.job_id].add(error.type)
    for job in store.jobs:
        if job.state in OPEN_STATES:
            continue  # reported by open_jobs
        kind_name, index = job.args[0], job.args[1]
        kind = KINDS[kind_name]
        charged = job.attempt - job.releases
        if not kind.succeeds:
            if job.state != "discarded" or charged != kind.max_attempts:
                check.evidence.append(
                    f"job {job.id} ({kind_name}) is {job.state} after {charged} charged attempts; "
                    f"expected discarded after {kind.max_attempts}"
                )
            continue
        if job.state == "completed":
            expected = expected_result(kind_name, index, job.attempt, job.args)
            if job.result != expected:
                check.evidence.append(
                    f"job {job.id} ({kind_name}) completed with {job.result}, expected {expected}"
                )
            continue
        chaos_only = error_types[job.id] <= CHAOS_ERRORS
        if not (job.state == "discarded" and chaos_only and charged >= kind.max_attempts):
            check.evidence.append(f"job {job.id} ({kind_name}) is {job.state}, expected completed")
    return check


def _snoozes(store: Store) -> Check:
    """Snooze and signals: a snoozing job snoozed as often as its handler asks, and no snooze spent an attempt."""
    check = Check("snoozes", f"every snoozy job completed after {SNOOZES} snoozes, none of them charged")
    for job in store.jobs:
        if job.args[0] != "snoozy" or job.state != "completed":
            continue  # an open or failed one is reported by open_jobs or outcomes
        if job.snoozes != SNOOZES or job.releases < job.snoozes:
            check.evidence.append(
                f"job {job.id} completed with {job.snoozes} snoozes and {job.releases} releases; "
                f"expected {SNOOZES} snoozes, each a release"
            )
    return check


def _double_runs(runs: dict[tuple[str, int], list[ExecutionRow]]) -> Check:
    check = Check("double_runs", "no (job, attempt) executed twice")
    for (job_id, attempt), found in sorted(runs.items()):
        if len(found) > 1:
            where = ", ".join(f"pid {run.pid} at {_clock(run.started_at)}" for run in found)
            check.evidence.append(f"job {job_id} attempt {attempt} ran {len(found)} times: {where}")
    return check


def _unexplained_reruns(
    jobs: dict[str, JobRow],
    runs: dict[tuple[str, int], list[ExecutionRow]],
    errors: dict[tuple[str, int], list[ErrorRow]],
    parks: set[tuple[str, int]],
) -> Check:
    check = Check(
        "unexplained_reruns",
        "every re-run follows an error recorded for the attempt before it, or its snooze or wait",
    )
    attempts: dict[str, list[int]] = defaultdict(list)
    for job_id, attempt in runs:
        attempts[job_id].append(attempt)
    for job_id, executed in attempts.items():
        job = jobs.get(job_id)
        last = job.attempt if job else max(executed)
        for attempt in sorted(executed):
            if attempt < last and not errors.get((job_id, attempt)) and (job_id, attempt) not in parks:
                check.evidence.append(
                    f"job {job_id}: attempt {attempt} ran and the job moved on to attempt {last} "
                    f"with no error recorded for attempt {attempt}"
                )
    return check


def _false_deaths(store: Store, interventions: Interventions, found_deadlocks: list[Deadlock]) -> Check:
    check = Check("false_deaths", "no worker declared dead unless the driver killed or froze it")
    for death in sorted(store.deaths, key=lambda death: death.at):
        if interventions.explains_death(death.worker_id, death.at):
            continue
        what = "" if interventions.known(death.worker_id) else " (a worker the driver never saw register)"
        lost_beats = [
            d
            for d in found_deadlocks
            if d.beat_of == death.worker_id and death.at - HEARTBEAT_TIMEOUT - 2 * SLACK <= d.at <= death.at
        ]
        why = f"; its heartbeat was a deadlock's victim at {_clock(lost_beats[-1].at)}" if lost_beats else ""
        check.evidence.append(f"worker {death.worker_id}{what} declared dead at {_clock(death.at)}{why}")
    return check


def _stuck(store: Store, interventions: Interventions, dead_at_claim: set[tuple[str, int]]) -> Check:
    check = Check(
        "stuck", "no job waited for its visibility timeout (a dead worker's jobs are recovered at its death)"
    )
    for error in store.errors:
        if error.type != "visibility_timeout":
            continue
        worker_id, claimed_at = store.claims.get((error.job_id, error.attempt), (None, 0.0))
        zombie = (
            ", after the store had declared it dead" if (error.job_id, error.attempt) in dead_at_claim else ""
        )
        check.evidence.append(
            f"job {error.job_id} attempt {error.attempt} (claimed by {worker_id} at "
            f"{_clock(claimed_at)}{zombie}) was recovered by its visibility timeout at {_clock(error.at)}; "
            "the driver's acts on that worker: "
            f"{interventions.history(worker_id, error.at)}"
        )
    return check


def _avoidable_reruns(
    store: Store, by_job: dict[str, list[ExecutionRow]], interventions: Interventions
) -> tuple[int, int]:
    """Re-runs after a lost attempt the driver did not cause; and how many began before the lost run ended."""
    avoidable = overlapping = 0
    for error in store.errors:
        if error.type not in ("worker_death", "visibility_timeout"):
            continue
        later = [run for run in by_job.get(error.job_id, []) if run.attempt > error.attempt]
        if not later:
            continue
        worker_id, _ = store.claims.get((error.job_id, error.attempt), (None, 0.0))
        if interventions.explains_lost_attempt(worker_id, error.at):
            continue
        avoidable += 1
        first_rerun = min(run.started_at for run in later)
        lost = [run for run in by_job[error.job_id] if run.attempt == error.attempt]
        if any(run.finished_at is not None and run.finished_at > first_rerun for run in lost):
            overlapping += 1
    return avoidable, overlapping


def _claims_while_dead(store: Store) -> set[tuple[str, int]]:
    """Claims a worker made after the store declared it dead and before it registered again."""
    deaths: dict[str, list[float]] = defaultdict(list)
    for death in store.deaths:
        deaths[death.worker_id].append(death.at)
    registered: dict[str, list[float]] = defaultdict(list)
    for event in store.registrations:
        registered[event.worker_id].append(event.at)
    found = set()
    for key, (worker_id, at) in store.claims.items():
        for died in deaths.get(worker_id, []):
            back = [again for again in registered.get(worker_id, []) if again > died]
            if died < at and (not back or at < min(back)):
                found.add(key)
                break
    return found


def _clock(at: float | None) -> str:
    if not at:
        return "?"
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M:%S.%f")[:-3]
