"""One chaos run, start to verdict: cluster, fleet, feeder, driver, drain, judgement.

1. A throwaway PostgreSQL cluster (the run restarts it) and the schema.
2. Reapers and workers (``Driver``), then the feeder, which enqueues the
   seeded plan's jobs spread over the acting period.
3. The driver acts for ``seconds``; then it thaws what it froze and lets
   the survivors drain until no job is open (bounded by ``drain_timeout``:
   a drain that never ends is reported by the verdict, not hidden by it).
4. Every process is sent SIGTERM; the store, the handlers' records and the
   PostgreSQL log are judged (``verdict.judge``).

The report, the action timeline, every process's log and the PostgreSQL log
are written to the artifacts directory.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.throwaway_postgres import ThrowawayCluster
from tests.waiting import WaitTimeout, wait_until

from . import durable
from .driver import Driver
from .plan import QUEUE, ChaosConfig, timing_environment
from .processes import ROOT, Fleet
from .verdict import OPEN_STATES, Interventions, Verdict, judge, read_store

DATABASE = "ojs_chaos"
ARTIFACTS = ROOT / "test-artifacts" / "chaos"
FEED_SHARE = 0.85  # the feeder spreads its jobs over this share of the acting period


@dataclass
class ChaosRun:
    config: ChaosConfig
    verdict: Verdict
    report: str
    artifacts: Path


def run_chaos(
    config: ChaosConfig, cluster: ThrowawayCluster | None = None, say: Callable[[str], None] = print
) -> ChaosRun:
    """One run on ``cluster`` (started; a new one, removed afterwards, if None)."""
    if cluster is None:
        with ThrowawayCluster() as own:
            return run_chaos(config, own, say)
    config = config.with_random_seed()
    artifacts = ARTIFACTS / f"{config.restart}-seed{config.seed}"
    shutil.rmtree(artifacts, ignore_errors=True)
    artifacts.mkdir(parents=True)
    say(
        f"chaos: seed {config.seed}, {config.jobs} jobs, {config.seconds:g}s of chaos, "
        f"{config.workers} workers x {config.concurrency}, {config.reapers} reapers, "
        f"PostgreSQL restart -m {config.restart}; artifacts in {artifacts}"
    )
    fleet = Fleet(cluster.create_database(DATABASE), artifacts, env=timing_environment())
    try:
        fleet.run("migrate", "--run-syncdb", "--verbosity", "0")
        return _run(config, cluster, fleet, say, artifacts)
    finally:
        fleet.close()
        (artifacts / "postgresql.log").write_text(cluster.log())


def _run(
    config: ChaosConfig, cluster: ThrowawayCluster, fleet: Fleet, say: Callable[[str], None], artifacts: Path
) -> ChaosRun:
    driver = Driver(fleet, cluster, config, say)
    driver.start()
    wait_until(lambda: all(p.worker_id for p in driver.live["worker"]), 120, "the first workers to register")
    feeder = fleet.manage(
        "feeder",
        "ojs_chaos_feed",
        "--jobs",
        str(config.jobs),
        "--seed",
        str(config.seed),
        "--seconds",
        str(config.seconds * FEED_SHARE),
    )
    # Snooze and signals: the waiters' signals, sent early, late or never as planned.
    signaller = fleet.manage("signaller", "ojs_chaos_signal", "--jobs", str(config.jobs), "--seed", str(config.seed))
    began = time.time()
    driver.act_for(config.seconds)
    driver.calm()
    say(f"chaos over after {time.time() - began:.0f}s; draining")
    drain_began = time.time()
    drained = _drain(cluster, driver, [feeder, signaller], config, say)
    drain_seconds = time.time() - drain_began
    driver.stop_all()
    with cluster.connect(DATABASE) as conn:
        store = read_store(conn)
        durable_store = durable.read(conn)
    figures = {
        "seed": config.seed,
        "PostgreSQL restart mode": config.restart,
        **driver.figures(),
        "chaos / drain / total seconds": (
            f"{config.seconds:.0f} / {drain_seconds:.0f} / {time.time() - began:.0f}"
        ),
        "drained": "yes" if drained else f"no, gave up after {config.drain_timeout:g}s",
    }
    verdict = judge(
        store,
        planned=config.jobs,
        interventions=Interventions(driver.interventions),
        postgres_log=cluster.log(),
        unexpected_exits=driver.unexpected,
        figures=figures,
    )
    # Durable jobs: their steps recorded once, resumed after the last record (tests/chaos/durable.py).
    durable_checks, durable_figures = durable.judge(durable_store)
    verdict.checks.extend(durable_checks)
    verdict.figures.update(durable_figures)
    timeline = "\n".join(action.line(driver.began) for action in driver.actions)
    report = verdict.render()
    (artifacts / "timeline.txt").write_text(timeline + "\n")
    (artifacts / "report.txt").write_text(report + "\n")
    return ChaosRun(config, verdict, report, artifacts)


def _drain(
    cluster: ThrowawayCluster, driver: Driver, feeders: list, config: ChaosConfig, say: Callable[[str], None]
) -> bool:
    """Wait until the feeders (the jobs', the signals') are done and no job is open; False if that did not
    happen in time."""
    deadline = time.monotonic() + config.drain_timeout
    last_said = 0.0
    with cluster.connect(DATABASE, autocommit=True) as conn:

        def open_jobs() -> int:
            return conn.execute(
                "SELECT count(*) FROM django_ojs_job WHERE queue = %s AND state = ANY(%s)",
                [QUEUE, list(OPEN_STATES)],
            ).fetchone()[0]

        def drained() -> bool:
            nonlocal last_said
            driver.tend()
            if any(feeder.alive() for feeder in feeders):
                return False
            left = open_jobs()
            if time.monotonic() - last_said > 10:
                last_said = time.monotonic()
                say(f"draining: {left} jobs open")
            return left == 0

        try:
            wait_until(drained, max(deadline - time.monotonic(), 0), "the jobs to drain", interval=0.5)
        except WaitTimeout:
            return False
    for feeder in feeders:
        if feeder.returncode != 0:
            driver.unexpected.append(
                f"the {feeder.role} exited with status {feeder.returncode}: {feeder.output()[-600:]}"
            )
    return True
