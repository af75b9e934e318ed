"""The chaos driver: keeps a fleet of workers and reapers running and keeps hurting it.

Every second or two (seeded) it SIGKILLs a worker, SIGTERMs one, freezes
one with SIGSTOP past the heartbeat timeout (SIGCONT later, and sometimes a
SIGKILL a moment after: a worker the store has declared dead, dying), or
SIGKILLs a reaper; killed and terminated processes are replaced at once, so
the fleet keeps its size. Once, at a random moment, it restarts PostgreSQL. Every
action is recorded with its time, and what it did to each worker id feeds
the verdict (``Interventions``). A process that exits without being told
to is recorded as unexpected.

Only workers that have registered (logged their id) are acted on, so every
worker the store knows can be matched to what was done to it.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from tests.throwaway_postgres import ThrowawayCluster
from tests.waiting import WaitTimeout

from .plan import GRACE_PERIOD, HEARTBEAT_TIMEOUT, QUEUE, ChaosConfig
from .processes import Fleet, Managed
from .verdict import Intervention

CADENCE = (0.8, 2.5)  # seconds between two actions
ACTIONS = {"SIGKILL worker": 0.3, "SIGTERM worker": 0.3, "SIGSTOP worker": 0.2, "SIGKILL reaper": 0.2}
FREEZE_BEYOND_TIMEOUT = (
    1.0,
    3.0,
)  # a frozen worker stays stopped this much longer than the heartbeat timeout
MAX_FROZEN = 2
# Share of thawed workers killed again soon after, and how soon (seconds).
ZOMBIE_KILLS = 0.5
ZOMBIE_KILL_AFTER = (0.05, 0.6)
TICK = 0.1
STOP_TIMEOUT = GRACE_PERIOD + 30


@dataclass(frozen=True)
class Action:
    at: float
    what: str
    target: str

    def line(self, began: float) -> str:
        return f"+{self.at - began:7.2f}s  {self.what:<18} {self.target}"


class Driver:
    def __init__(
        self, fleet: Fleet, cluster: ThrowawayCluster, config: ChaosConfig, say: Callable[[str], None] = print
    ):
        self.fleet = fleet
        self.cluster = cluster
        self.rng = random.Random(f"driver-{config.seed}")
        self.size = {"worker": config.workers, "reaper": config.reapers}
        self.concurrency = config.concurrency
        self.restart_mode = config.restart
        self.down_seconds = config.down_seconds
        self.say = say
        self.live: dict[str, list[Managed]] = {"worker": [], "reaper": []}
        self.stopping: dict[Managed, float] = {}  # sent SIGTERM, draining -> when
        self.frozen: dict[Managed, float] = {}  # -> when to SIGCONT
        self.doomed: dict[Managed, float] = {}  # thawed -> when to SIGKILL
        self.actions: list[Action] = []
        self.interventions: list[Intervention] = []
        self.unexpected: list[str] = []
        # Drains the database restart cut short: the worker gave its jobs up (exit 1), as designed.
        self.drains_cut_short: list[str] = []
        self.restarts: list[tuple[float, float]] = []  # (stopped, started)
        self.began = time.time()
        self.ended = float("inf")  # when the acting stopped

    # -- the fleet ------------------------------------------------------------------------

    def start(self) -> None:
        self.began = time.time()
        self._fill()

    def _spawn(self, role: str) -> Managed:
        if role == "worker":
            return self.fleet.manage(
                "worker",
                "ojs_worker",
                "--queue",
                QUEUE,
                "--concurrency",
                str(self.concurrency),
                "--grace-period",
                str(GRACE_PERIOD),
            )
        return self.fleet.manage("reaper", "ojs_reaper")

    def _fill(self) -> None:
        for role, size in self.size.items():
            while len(self.live[role]) < size:
                self.live[role].append(self._spawn(role))

    def tend(self) -> None:
        """Thaw what is due, notice exits, keep the fleet at its size."""
        now = time.time()
        for process, thaw_at in list(self.frozen.items()):
            if now >= thaw_at:
                self._thaw(process, chaos=True)
        for process, kill_at in list(self.doomed.items()):
            if now >= kill_at:
                del self.doomed[process]
                if process in self.live["worker"]:
                    self._stop_process(process, signal.SIGKILL)
        for processes in self.live.values():
            for process in list(processes):
                if not process.alive() and process not in self.frozen:
                    processes.remove(process)
                    self._exited(process, f"{process} exited by itself with status {process.returncode}")
        for process, sent_at in list(self.stopping.items()):
            if not process.alive():
                del self.stopping[process]
                code = process.returncode
                self._record("exited", process, f"status {code}")
                if code != 0:
                    restarted = any(
                        sent_at <= started and stopped <= now for stopped, started in self.restarts
                    )
                    self._exited(
                        process, f"{process} exited with status {code} after SIGTERM", expected=restarted
                    )
        self._fill()

    def _exited(self, process: Managed, what: str, expected: bool = False) -> None:
        tail = " | ".join(process.output().strip().splitlines()[-3:])
        (self.drains_cut_short if expected else self.unexpected).append(
            f"{what}; its log ends: {tail[-600:]}"
        )
        if process.worker_id:
            self.interventions.append(Intervention(process.worker_id, "exit", time.time()))

    # -- acting ----------------------------------------------------------------------------

    def act_for(self, seconds: float) -> None:
        """Act until ``seconds`` have passed since ``start``, restarting PostgreSQL once on the way."""
        end = self.began + seconds
        restart_at = self.began + seconds * self.rng.uniform(0.3, 0.7)
        next_action = time.time() + self.rng.uniform(*CADENCE)
        while time.time() < end:
            self.tend()
            now = time.time()
            if restart_at is not None and now >= restart_at:
                restart_at = None
                self._restart_postgres()
            elif now >= next_action:
                self._random_action()
                next_action = now + self.rng.uniform(*CADENCE)
            time.sleep(TICK)
        self.ended = time.time()

    def calm(self) -> None:
        """The chaos is over: thaw every frozen worker, kill no thawed one."""
        for process in list(self.frozen):
            self._thaw(process)
        self.doomed.clear()
        self.tend()

    def _targets(self, role: str) -> list[Managed]:
        return [
            p
            for p in self.live[role]
            if p.alive() and p not in self.frozen and (role != "worker" or p.worker_id)
        ]

    def _random_action(self) -> None:
        names = list(ACTIONS)
        what = self.rng.choices(names, [ACTIONS[name] for name in names])[0]
        role = what.split()[1]
        targets = self._targets(role)
        if what == "SIGSTOP worker" and len(self.frozen) >= MAX_FROZEN:
            return
        if not targets:
            return
        process = self.rng.choice(targets)
        if what == "SIGSTOP worker":
            process.send(signal.SIGSTOP)
            self.frozen[process] = time.time() + HEARTBEAT_TIMEOUT + self.rng.uniform(*FREEZE_BEYOND_TIMEOUT)
            self._record("SIGSTOP", process)
            return
        self._stop_process(process, signal.SIGKILL if what.startswith("SIGKILL") else signal.SIGTERM)

    def _stop_process(self, process: Managed, signum: signal.Signals) -> None:
        process.send(signum)
        self._record(signum.name, process)
        self.live[process.role].remove(process)
        if signum == signal.SIGTERM:
            self.stopping[process] = time.time()
        else:
            process.wait(30)
        self._fill()

    def _thaw(self, process: Managed, chaos: bool = False) -> None:
        del self.frozen[process]
        process.send(signal.SIGCONT)
        self._record("SIGCONT", process)
        if chaos and self.rng.random() < ZOMBIE_KILLS:
            self.doomed[process] = time.time() + self.rng.uniform(*ZOMBIE_KILL_AFTER)

    def _restart_postgres(self) -> None:
        self._log_action(f"PostgreSQL stop -m {self.restart_mode}", f"port {self.cluster.port}")
        stopped = time.time()
        self.cluster.stop(self.restart_mode)
        if self.down_seconds:
            time.sleep(self.down_seconds)  # the outage itself, not a wait for a condition
        self.cluster.start()
        self.restarts.append((stopped, time.time()))
        self._log_action("PostgreSQL started", f"port {self.cluster.port}")

    def _record(self, what: str, process: Managed, note: str = "") -> None:
        worker_id = process.worker_id
        if worker_id and what in ("SIGKILL", "SIGTERM", "SIGSTOP", "SIGCONT"):
            self.interventions.append(Intervention(worker_id, what, time.time()))
        target = f"{process} {worker_id or ''} {note}".strip()
        self._log_action(f"{what} {process.role}" if what != "exited" else "exited", target)

    def _log_action(self, what: str, target: str) -> None:
        action = Action(time.time(), what, target)
        self.actions.append(action)
        self.say(action.line(self.began))

    # -- the end ---------------------------------------------------------------------------

    def stop_all(self) -> None:
        """SIGTERM every process still running and wait for it; a non-zero exit is unexpected."""
        self.calm()
        for role in ("worker", "reaper"):
            for process in self.live[role]:
                process.send(signal.SIGTERM)
                self._record("SIGTERM", process)
                self.stopping[process] = time.time()
            self.live[role] = []
        for process in list(self.stopping):
            try:
                process.wait(STOP_TIMEOUT)
            except WaitTimeout as exc:
                self.unexpected.append(str(exc)[:800])
                process.close()
        self.size = {"worker": 0, "reaper": 0}
        self.tend()

    def figures(self) -> dict[str, int]:
        """What the driver did while acting (not the final SIGTERMs)."""
        counts = Counter(action.what for action in self.actions if action.at <= self.ended)
        return {
            "workers SIGKILLed": counts["SIGKILL worker"],
            "workers SIGTERMed": counts["SIGTERM worker"],
            "workers frozen (SIGSTOP)": counts["SIGSTOP worker"],
            "reapers SIGKILLed": counts["SIGKILL reaper"],
            "PostgreSQL restarts": counts["PostgreSQL started"],
            "drains the restart cut short (exit 1, jobs left to the reaper)": len(self.drains_cut_short),
            "processes started": len(self.fleet.started),
        }
