"""The chaos run's shape, timings and jobs, from a seed (pure: no database, no processes).

Five kinds of job, each with a handler in ``tests.chaos.app.jobs`` whose
outcome is fixed by its arguments, so the verdict can say what every job
should have become:

- ``quick``: returns at once (a few ms) -- most of the traffic, and the
  ACK/heartbeat churn where lock-order bugs show;
- ``flaky``: fails its first attempt, succeeds on the next;
- ``doomed``: always fails; discarded after ``DOOMED_MAX_ATTEMPTS``;
- ``slow``: runs for seconds;
- ``long``: runs longer than the visibility timeout, alive only through
  heartbeats;
- ``durable``: ``DURABLE_STEPS`` durable steps (``ctx.run_step``) of a few
  hundred ms each, so a worker is often killed mid-job; its retry must resume
  at the first step not recorded (``tests/chaos/durable.py`` judges it).

Jobs that should succeed may fail a few attempts to the chaos (a SIGKILL
charges the attempt it interrupts), so they get room for it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

QUEUE = "chaos"

# The outside tester's timings: fast enough that a short run sees every kind
# of death, slow enough that a 2-core machine keeps up.
HEARTBEAT_INTERVAL = 1.0
HEARTBEAT_TIMEOUT = 3.0
VISIBILITY_TIMEOUT = 15.0
GRACE_PERIOD = 5.0
REAPER_INTERVAL = 0.25


def timing_environment() -> dict[str, str]:
    """The timings, for the environment of every process a run starts (``tests.chaos.settings``)."""
    return {
        "OJS_HEARTBEAT_INTERVAL": str(HEARTBEAT_INTERVAL),
        "OJS_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "OJS_REAPER_INTERVAL": str(REAPER_INTERVAL),
    }


RETRY_INTERVAL = "PT0.2S"
SUCCESS_MAX_ATTEMPTS = 10
DOOMED_MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class ChaosConfig:
    """The shape of one run; the defaults are the CI run's."""

    jobs: int = 3000
    seconds: float = 60.0  # how long the driver acts
    restart: str = "fast"  # how PostgreSQL is stopped for its restart
    seed: int = 0
    workers: int = 4
    concurrency: int = 10
    reapers: int = 2
    down_seconds: float = 0.0  # how long it stays down
    drain_timeout: float = 240.0

    @classmethod
    def long(cls, **overrides) -> ChaosConfig:
        """The person's run: 20,000 jobs under 6 minutes of chaos, about 8 minutes in all."""
        return replace(cls(jobs=20_000, seconds=360.0, drain_timeout=600.0), **overrides)

    def with_random_seed(self) -> ChaosConfig:
        return self if self.seed else replace(self, seed=random.SystemRandom().randrange(1, 10**6))


@dataclass(frozen=True)
class Kind:
    name: str
    weight: float
    max_attempts: int
    # Seconds the handler runs: (low, high), drawn per job.
    seconds: tuple[float, float]
    succeeds: bool = True

    @property
    def type(self) -> str:
        return f"chaos.{self.name}"

    def options(self) -> dict[str, Any]:
        """The handler's enqueue defaults (``@django_ojs.job`` options)."""
        return {
            "queue": QUEUE,
            "visibility_timeout": VISIBILITY_TIMEOUT,
            "retry": {
                "max_attempts": self.max_attempts,
                "initial_interval": RETRY_INTERVAL,
                "backoff_coefficient": 1.0,
                "jitter": False,
            },
        }


KINDS = {
    kind.name: kind
    for kind in (
        Kind("quick", 0.64, SUCCESS_MAX_ATTEMPTS, (0.0, 0.02)),
        Kind("flaky", 0.12, SUCCESS_MAX_ATTEMPTS, (0.0, 0.02)),
        Kind("doomed", 0.08, DOOMED_MAX_ATTEMPTS, (0.0, 0.02), succeeds=False),
        Kind("slow", 0.11, SUCCESS_MAX_ATTEMPTS, (0.5, 3.0)),
        Kind("long", 0.01, SUCCESS_MAX_ATTEMPTS, (VISIBILITY_TIMEOUT + 1, VISIBILITY_TIMEOUT + 5)),
        # The whole job's seconds, shared by its steps.
        Kind("durable", 0.04, SUCCESS_MAX_ATTEMPTS, (1.0, 3.0)),
    )
}
# The steps of a durable job: step-0 ... step-4.
DURABLE_STEPS = 5


def step_names() -> list[str]:
    return [f"step-{n}" for n in range(DURABLE_STEPS)]


def step_result(step: str, attempt: int) -> dict[str, Any]:
    """What a durable step's body returns, and so what its record must hold: the attempt that ran it."""
    return {"step": step, "attempt": attempt}


# -- snooze and signals (docs/how-to/snooze-signals-timers.md) ------------------------------
# ``snoozy`` snoozes SNOOZES times for ``seconds`` each, then completes: its snoozes
# must spend no attempt. ``waiter`` waits for the signal SIGNAL: the signaller
# (``ojs_chaos_signal``) sends it as soon as the job exists ("early", often before
# it parks), ``seconds`` after it was enqueued ("late", usually after), or never
# ("never": its wait times out after ``seconds`` and returns None). Each must
# complete once, with the payload it was sent (``waiter_payload``) or None.
SNOOZES = 2
SIGNAL = "go"
# A signalled waiter's timeout: longer than any run, so only the signal wakes it.
SIGNALLED_TIMEOUT = 900.0
WAIT_MODES = {"early": 0.35, "late": 0.4, "never": 0.25}
KINDS.update(
    (kind.name, kind)
    for kind in (
        Kind("snoozy", 0.04, SUCCESS_MAX_ATTEMPTS, (0.2, 1.0)),
        Kind("waiter", 0.04, SUCCESS_MAX_ATTEMPTS, (1.0, 6.0)),
    )
)


def wait_mode(seed: int, index: int) -> str:
    """How the signaller treats waiter ``index``: drawn apart from the plan's draws, which stay as they were."""
    rng = random.Random(f"wait-{seed}-{index}")
    return rng.choices(list(WAIT_MODES), list(WAIT_MODES.values()))[0]


def waiter_payload(index: int) -> dict[str, Any]:
    """The payload the signaller sends waiter ``index``, and its result carries."""
    return {"index": index}


@dataclass(frozen=True)
class PlannedJob:
    index: int
    kind: str
    seconds: float
    # A waiter's: early, late or never (wait_mode).
    mode: str = ""

    def enqueue_item(self) -> dict[str, Any]:
        """The ``enqueue_many`` item (the handler's defaults supply queue, retry, visibility timeout)."""
        args: list[Any] = [self.kind, self.index, self.seconds]
        if self.mode:
            args.append(self.mode)
        return {"type": KINDS[self.kind].type, "args": args}


def plan(jobs: int, seed: int) -> list[PlannedJob]:
    """``jobs`` jobs of the mixed kinds, the same for the same seed."""
    rng = random.Random(f"jobs-{seed}")
    names = list(KINDS)
    weights = [KINDS[name].weight for name in names]
    planned = []
    for index in range(jobs):
        kind = KINDS[rng.choices(names, weights)[0]]
        mode = wait_mode(seed, index) if kind.name == "waiter" else ""
        planned.append(PlannedJob(index, kind.name, round(rng.uniform(*kind.seconds), 3), mode))
    return planned


def expected_result(kind: str, index: int, attempt: int, args: list[Any] | None = None) -> dict[str, Any]:
    """What a successful handler returns: enough to tell a stale attempt's result from the last one's;
    a waiter's adds the payload its wait returned, from its ``args`` (None if it was never signalled)."""
    result: dict[str, Any] = {"kind": kind, "index": index, "attempt": attempt}
    if kind == "waiter" and args is not None:
        result["payload"] = None if args[3] == "never" else waiter_payload(index)
    return result
