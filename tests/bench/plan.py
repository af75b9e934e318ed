"""What one run of the suite measures: its sizes, its database, and whether the peer takes part."""

from __future__ import annotations

from dataclasses import dataclass

from .stage import Stage


@dataclass(frozen=True)
class Sizes:
    jobs: int = 20_000  # bulk enqueue, and the backlog each worker run works through
    single: int = 2_000  # single enqueue (one transaction per job is slow by nature)
    repeat: int = 3  # runs per figure; the median is reported
    fetch_small: int = 1_000  # available jobs for FETCH latency ...
    fetch_large: int = 1_000_000  # ... and the large backlog compared with it
    fetch_rounds: int = 500
    http_seconds: float = 5.0  # load per HTTP figure
    http_clients: int = 8
    pickup_samples: int = 100

    @classmethod
    def quick(cls) -> Sizes:
        """A smoke run: every code path, small numbers, one repeat."""
        return cls(jobs=500, single=100, repeat=1, fetch_small=1_000, fetch_large=10_000, fetch_rounds=50,
                   http_seconds=1.0, pickup_samples=10)


@dataclass(frozen=True)
class Run:
    stage: Stage
    sizes: Sizes
    peer: bool  # pgqueuer takes part
    peer_note: str  # what the peer column says when it does not
    # --observability: the worker section also runs each shape with metrics on,
    # and with metrics and tracing on, interleaved with its runs off.
    observability: bool = False
    # --job-cpu-ms: the worker section's jobs use this much CPU each (demo.spin) instead of
    # none (demo.noop); the floor and the peer, whose jobs do nothing, are then not run.
    job_cpu_ms: float = 0.0

    @property
    def dsn(self) -> str:
        return self.stage.dsn
