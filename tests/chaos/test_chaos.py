"""The chaos run in CI: a few thousand jobs under about a minute of chaos (see ``tests/chaos/__init__.py``).

It restarts the database both ways, ``fast`` and ``immediate``, unless
``OJS_CHAOS_RESTART`` names one (tox.ini's Django 5.2 environment runs both). ``OJS_CHAOS_SEED``
replays a seed a failed run printed. ``python -m tests.chaos --long`` is the
big run, for a person.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from .plan import ChaosConfig
from .run import run_chaos

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.chaos]

RESTART_MODES = (
    [os.environ["OJS_CHAOS_RESTART"]] if os.environ.get("OJS_CHAOS_RESTART") else ["fast", "immediate"]
)


@pytest.mark.parametrize("restart", RESTART_MODES)
def test_no_job_lost_run_twice_or_stuck_under_chaos(postgres_cluster, restart):
    config = replace(ChaosConfig(), restart=restart, seed=int(os.environ.get("OJS_CHAOS_SEED", "0")))
    run = run_chaos(config, postgres_cluster)
    print(run.report)
    assert run.verdict.passed, (
        f"chaos run (seed {run.config.seed}, restart -m {restart}; replay with "
        f"OJS_CHAOS_SEED={run.config.seed} or python -m tests.chaos --seed {run.config.seed} "
        f"--restart {restart}; logs in {run.artifacts}):\n"
        f"{run.report}"
    )
