"""``python -m tests.chaos [--long] [--jobs N] [--seconds S] [--restart fast|immediate] [--seed N]``

Runs one chaos run (see ``tests/chaos/__init__.py``), prints the actions as
they happen and the report at the end; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from tests.throwaway_postgres import available

from .plan import ChaosConfig
from .run import run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--long", action="store_true", help="20,000 jobs under 6 minutes of chaos (about 8 minutes in all)"
    )
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--seconds", type=float, help="how long the driver acts")
    parser.add_argument(
        "--restart",
        choices=["fast", "immediate"],
        default="fast",
        help="how PostgreSQL is stopped for its restart (default: fast)",
    )
    parser.add_argument(
        "--down", type=float, default=0.0, help="seconds PostgreSQL stays down in the restart"
    )
    parser.add_argument("--seed", type=int, default=0, help="0: a random one (printed)")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--concurrency", type=int)
    options = parser.parse_args()
    reason = available()
    if reason:
        parser.error(reason)
    config = ChaosConfig.long() if options.long else ChaosConfig()
    overrides = {
        name: value
        for name, value in {
            "jobs": options.jobs,
            "seconds": options.seconds,
            "workers": options.workers,
            "concurrency": options.concurrency,
        }.items()
        if value is not None
    }
    config = replace(
        config, restart=options.restart, seed=options.seed, down_seconds=options.down, **overrides
    )
    run = run_chaos(config)
    print(run.report)
    return 0 if run.verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
