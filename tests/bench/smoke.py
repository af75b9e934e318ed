"""Running a bench tool as its smoke tests do: ``run_bench("recovery", "--rounds", "1")``."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import database_url

from .stage import ROOT


def run_bench(module: str, *args: str, timeout: int = 300) -> str:
    """``python -m tests.bench.<module> <args>`` on the test server (``DATABASE_URL``); its output,
    once it has exited 0 (the tools make and drop databases of their own there)."""
    result = subprocess.run(
        [sys.executable, "-m", f"tests.bench.{module}", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, "DATABASE_URL": database_url()},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout
