"""The chaos verdict's judgement, on made-up rows and logs: it must be able to fail, and say why."""

from __future__ import annotations

from tests.chaos.plan import expected_result
from tests.chaos.verdict import (
    ErrorRow,
    ExecutionRow,
    Intervention,
    Interventions,
    JobRow,
    Store,
    WorkerEvent,
    deadlocks,
    judge,
)

BEAT = (
    'UPDATE "django_ojs_job" SET "lease_expires_at" = (\'2026-01-01 10:00:00+00:00\'::timestamptz + '
    '"django_ojs_job"."visibility_timeout"), "worker_id" = \'w-1\' WHERE ("django_ojs_job"."seq" IN (1, 2))'
)
FAIL = (
    'SELECT "django_ojs_job"."seq" FROM "django_ojs_job" WHERE "django_ojs_job"."id" = \'j\'::uuid '
    "LIMIT 1 FOR UPDATE"
)
LOG = f"""\
2026-01-01 10:00:01.000 UTC [11] LOG:  process 11 detected deadlock while waiting for ShareLock on transaction 5
2026-01-01 10:00:01.000 UTC [11] DETAIL:  Process holding the lock: 12. Wait queue: .
2026-01-01 10:00:01.000 UTC [11] STATEMENT:  {BEAT}
2026-01-01 10:00:01.001 UTC [11] ERROR:  deadlock detected
2026-01-01 10:00:01.001 UTC [11] DETAIL:  Process 11 waits for ShareLock on transaction 5; blocked by process 12.
\tProcess 12 waits for ShareLock on transaction 6; blocked by process 11.
\tProcess 11: {BEAT}
\tProcess 12: {FAIL}
2026-01-01 10:00:01.001 UTC [30] LOG:  could not receive data from client: Connection reset by peer
2026-01-01 10:00:01.001 UTC [11] HINT:  See server log for query details.
2026-01-01 10:00:01.001 UTC [11] STATEMENT:  {BEAT}
2026-01-01 10:00:02.000 UTC [31] DETAIL:  Process holding the lock: 40. Wait queue: .
"""


def test_a_deadlock_in_the_log_names_its_victim_and_cycle():
    [found] = deadlocks(LOG)
    assert found.beat_of == "w-1"
    assert found.describe() == (
        "10:00:01.001: victim 'BEAT lease extension'; the cycle: BEAT lease extension / FAIL row lock"
    )


def test_a_death_is_explained_by_a_kill_or_a_freeze_past_the_heartbeat_timeout():
    done = Interventions(
        [
            Intervention("killed", "SIGKILL", 100.0),
            Intervention("frozen", "SIGSTOP", 100.0),
            Intervention("frozen", "SIGCONT", 105.0),
            Intervention("terminated", "SIGTERM", 100.0),
        ]
    )
    assert done.explains_death("killed", 103.0) == "killed"
    assert done.explains_death("killed", 100.5) is None  # silent before the kill
    assert done.explains_death("frozen", 104.0) == "frozen"
    assert done.explains_death("frozen", 106.5) == "frozen"  # a pass that began just before SIGCONT
    assert done.explains_death("frozen", 108.5) is None
    assert done.explains_death("terminated", 103.0) is None  # a draining worker keeps beating
    assert done.explains_lost_attempt("terminated", 103.0) == "terminated"
    assert done.explains_death("stranger", 103.0) is None


def _job(index: int, kind: str, state: str, attempt: int, result=None, max_attempts: int = 10) -> JobRow:
    return JobRow(
        f"job-{index}", f"chaos.{kind}", [kind, index, 0.0], state, attempt, max_attempts, 0, result
    )


def _run(index: int, attempt: int, worker: str = "w-1") -> ExecutionRow:
    return ExecutionRow(f"job-{index}", attempt, worker, 1, 50.0 + attempt, 51.0 + attempt)


def test_each_violation_is_found_and_a_clean_job_passes():
    jobs = [
        _job(0, "quick", "completed", 1, expected_result("quick", 0, 1)),  # clean
        _job(1, "quick", "completed", 2, expected_result("quick", 1, 1)),  # a stale attempt's result
        _job(2, "quick", "completed", 1, expected_result("quick", 2, 1)),  # ran twice
        _job(3, "quick", "completed", 2, expected_result("quick", 3, 2)),  # re-run with no error
        _job(4, "doomed", "discarded", 3, max_attempts=3),  # clean
        _job(5, "quick", "active", 1),  # left open
    ]
    runs = [
        _run(0, 1),
        _run(1, 1),
        _run(1, 2),
        _run(2, 1),
        _run(2, 1, "w-2"),
        _run(3, 1),
        _run(3, 2),
        _run(4, 1),
        _run(4, 2),
        _run(4, 3),
        _run(5, 1),
    ]
    errors = [
        ErrorRow("job-1", 1, "worker_death", 52.0),
        ErrorRow("job-4", 1, "DoomedError", 52.0),
        ErrorRow("job-4", 2, "DoomedError", 53.0),
        ErrorRow("job-4", 3, "DoomedError", 54.0),
        ErrorRow("job-5", 1, "visibility_timeout", 60.0),
    ]
    store = Store(
        jobs,
        errors,
        runs,
        claims={("job-5", 1): ("w-1", 40.0)},
        deaths=[WorkerEvent("w-1", 52.0)],
        registrations=[WorkerEvent("w-1", 10.0)],
    )
    verdict = judge(store, planned=7, interventions=Interventions([]), postgres_log=LOG, unexpected_exits=[])
    counts = {check.name: check.count for check in verdict.checks}
    assert counts == {
        "open_jobs": 1,
        "lost": 1,
        "outcomes": 1,
        "double_runs": 1,
        "unexplained_reruns": 1,
        "deadlocks": 1,
        "false_deaths": 1,
        "stuck": 1,
        "unexpected_exits": 0,
        "snoozes": 0,
    }
    assert not verdict.passed
    assert verdict.figures["avoidable re-runs"] == 1  # job-1: worker w-1 was declared dead, not killed
    assert "verdict: FAILED" in verdict.render()


def test_a_snoozed_or_parked_attempt_explains_its_rerun_and_snoozes_are_counted():
    """Snooze and signals: a run that ended parked is no unexplained re-run; a snoozy job must have
    snoozed SNOOZES times, each a release; a waiter must carry the payload it was sent, or None."""
    snoozy = JobRow("job-0", "chaos.snoozy", ["snoozy", 0, 0.2], "completed", 3, 10, 2,
                    expected_result("snoozy", 0, 3), snoozes=2)
    short = JobRow("job-1", "chaos.snoozy", ["snoozy", 1, 0.2], "completed", 2, 10, 1,
                   expected_result("snoozy", 1, 2), snoozes=1)
    signalled = JobRow("job-2", "chaos.waiter", ["waiter", 2, 3.0, "late"], "completed", 2, 10, 1,
                       {**expected_result("waiter", 2, 2), "payload": {"index": 2}})
    lost_payload = JobRow("job-3", "chaos.waiter", ["waiter", 3, 3.0, "early"], "completed", 1, 10, 0,
                          {**expected_result("waiter", 3, 1), "payload": None})
    timed_out = JobRow("job-4", "chaos.waiter", ["waiter", 4, 3.0, "never"], "completed", 2, 10, 1,
                       {**expected_result("waiter", 4, 2), "payload": None})
    runs = [_run(0, 1), _run(0, 2), _run(0, 3), _run(1, 1), _run(1, 2), _run(2, 1), _run(2, 2), _run(3, 1),
            _run(4, 1), _run(4, 2)]
    parks = {("job-0", 1), ("job-0", 2), ("job-1", 1), ("job-2", 1), ("job-4", 1)}
    store = Store([snoozy, short, signalled, lost_payload, timed_out], [], runs, claims={}, deaths=[],
                  registrations=[], parks=parks)
    verdict = judge(store, planned=5, interventions=Interventions([]), postgres_log="", unexpected_exits=[])
    counts = {check.name: check.count for check in verdict.checks}
    assert (counts["unexplained_reruns"], counts["snoozes"], counts["outcomes"]) == (0, 1, 1)
def test_the_durable_checks_fail_on_a_step_re_run_after_its_record_a_made_up_record_and_a_missing_step():
    from .durable import DurableStore, StepRecord, StepRun
    from .durable import judge as judge_durable
    from .plan import step_names, step_result

    def recorded(job: str, step: str, attempt: int) -> StepRecord:
        return StepRecord(job, step, attempt, step_result(step, attempt))

    steps = step_names()
    # "good": attempt 1 recorded two steps and died in the third; attempt 2 resumed there.
    good = [recorded("good", step, 1 if n < 2 else 2) for n, step in enumerate(steps)]
    good_runs = [StepRun("good", step, 1) for step in steps[:3]] + [StepRun("good", step, 2) for step in steps[2:]]
    # "rerun": attempt 2 ran step-0 again although attempt 1 had recorded it.
    rerun = [recorded("rerun", step, 1 if n == 0 else 2) for n, step in enumerate(steps)]
    rerun_runs = [StepRun("rerun", steps[0], 1)] + [StepRun("rerun", step, 2) for step in steps]
    # "fake": step-0's record names an attempt that never ran it; "short": completed, one step unrecorded.
    fake = [StepRecord("fake", steps[0], 3, step_result(steps[0], 3))]
    short = [recorded("short", step, 1) for step in steps[:-1]]
    store = DurableStore(
        {"good": "completed", "rerun": "completed", "fake": "discarded", "short": "completed"},
        good + rerun + fake + short,
        good_runs + rerun_runs + [StepRun("short", step, 1) for step in steps],
    )
    checks, figures = judge_durable(store)
    assert {check.name: check.count for check in checks} == {
        "durable_recorded_once": 1, "durable_resumed": 1, "durable_records_genuine": 1,
    }
    assert figures["durable jobs resumed by a later attempt"] == 2
    clean = DurableStore({"good": "completed"}, good, good_runs)
    assert all(check.passed for check in judge_durable(clean)[0])
