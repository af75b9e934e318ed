"""The chaos verdict's durable-job checks: steps recorded once, and a retry resumes after the last record.

``read`` takes the step records of the run's jobs and the side effects the
step bodies wrote (``app/durable.py``); ``judge`` is pure. Why the checks
hold without clocks: a step is recorded in a transaction that holds the
job's row and checks the lease, so every record of attempt ``r`` committed
before attempt ``r`` lost the job, hence before any later attempt was
claimed; and a later attempt reads the records at its first step. So:

- a step body run by attempt ``a`` while an earlier attempt's record of the
  step exists ran after that record was committed: the resume failed;
- every record of attempt ``r`` needs a body run by ``r`` (the record is the
  result of a run, never made up) holding that run's result;
- a completed durable job recorded each of its steps, each once.

A body whose attempt never recorded it (killed mid-step, or frozen and
thawed after the job was given to another attempt, whose record is then
refused) runs again in a later attempt: at-least-once by design, the line
the how-to draws; it is counted, not failed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from .plan import QUEUE, step_names, step_result
from .verdict import Check


@dataclass(frozen=True)
class StepRecord:
    job_id: str
    step: str
    attempt: int
    result: Any


@dataclass(frozen=True)
class StepRun:
    job_id: str
    step: str
    attempt: int


@dataclass
class DurableStore:
    # (job id, state) of the run's durable jobs.
    jobs: dict[str, str]
    records: list[StepRecord]
    runs: list[StepRun]


def read(conn: Any) -> DurableStore:
    """The run's durable jobs, their step records and their step bodies' runs (a psycopg connection)."""
    jobs = {
        str(job_id): state
        for job_id, state in conn.execute(
            "SELECT id, state FROM django_ojs_job WHERE queue = %s AND type = 'chaos.durable'", [QUEUE]
        )
    }
    records = [
        StepRecord(str(job_id), name, attempt, result)
        for job_id, name, attempt, result in conn.execute(
            "SELECT j.id, s.name, s.attempt, s.result FROM django_ojs_jobstep s "
            "JOIN django_ojs_job j ON j.seq = s.job_id WHERE j.queue = %s",
            [QUEUE],
        )
    ]
    runs = [
        StepRun(str(job_id), step, attempt)
        for job_id, step, attempt in conn.execute("SELECT job_id, step, attempt FROM ojs_chaos_stepeffect")
    ]
    return DurableStore(jobs, records, runs)


def judge(store: DurableStore) -> tuple[list[Check], dict[str, Any]]:
    """The checks and the figures of the durable jobs."""
    recorded: dict[tuple[str, str], list[StepRecord]] = defaultdict(list)
    for record in store.records:
        recorded[(record.job_id, record.step)].append(record)
    ran = Counter((run.job_id, run.step, run.attempt) for run in store.runs)

    once = Check("durable_recorded_once", "every completed durable job recorded each of its steps, each once")
    for job_id, state in sorted(store.jobs.items()):
        if state != "completed":
            continue
        for step in step_names():
            count = len(recorded.get((job_id, step), []))
            if count != 1:
                once.evidence.append(f"durable job {job_id} is completed with {count} records of {step}")

    resumed = Check(
        "durable_resumed", "no attempt ran the body of a step an earlier attempt had recorded (a retry resumes)"
    )
    cut_off = 0
    for run in store.runs:
        found = recorded.get((run.job_id, run.step))
        if not found:
            continue
        first = found[0]
        if run.attempt > first.attempt:
            resumed.evidence.append(
                f"durable job {run.job_id}: {run.step} recorded by attempt {first.attempt}, "
                f"its body ran again in attempt {run.attempt}"
            )
        elif run.attempt < first.attempt:
            cut_off += 1

    genuine = Check("durable_records_genuine", "every step record is the result of its attempt's run of the step")
    for record in store.records:
        if not ran.get((record.job_id, record.step, record.attempt)):
            genuine.evidence.append(
                f"durable job {record.job_id}: {record.step} recorded by attempt {record.attempt}, "
                "which never ran its body"
            )
        elif record.result != step_result(record.step, record.attempt):
            genuine.evidence.append(
                f"durable job {record.job_id}: {record.step} recorded {record.result}, "
                f"expected {step_result(record.step, record.attempt)}"
            )

    resumes = {(record.job_id, record.attempt) for record in store.records}
    by_job = Counter(job_id for job_id, _ in resumes)
    figures = {
        "durable jobs (completed)": f"{len(store.jobs)} ({sum(s == 'completed' for s in store.jobs.values())})",
        "durable jobs resumed by a later attempt": sum(1 for n in by_job.values() if n > 1),
        "step bodies run / steps recorded": f"{len(store.runs)} / {len(store.records)}",
        "step bodies cut off before their record (run again later)": cut_off,
    }
    return [once, resumed, genuine], figures
