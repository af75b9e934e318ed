"""Job handlers the browser tests' worker process runs (autodiscovered as ``<app>/jobs.py``)."""

from __future__ import annotations

from typing import Any

import django_ojs

RECOVERABLE = "admin_e2e.recoverable"


@django_ojs.job(RECOVERABLE)
def recoverable(*args: Any, **kwargs: Any) -> dict[str, bool]:
    """Succeeds now: the dead-letter test stands for a bug that was fixed after the job died."""
    return {"recovered": True}


PROGRESS = "admin_e2e.progress"


@django_ojs.job(PROGRESS)
def reports_progress(ctx: Any, release_path: str) -> dict[str, bool]:
    """Reports 42 % with structured data and a message, then works until the test creates ``release_path``."""
    import os
    import time

    ctx.progress(0.42, {"phase": "copying", "rows": 420}, message="copying rows 1-420")
    while not os.path.exists(release_path) and not ctx.cancelled:
        time.sleep(0.05)
    return {"done": True}
