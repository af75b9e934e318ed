"""Job handlers the browser tests' worker process runs (autodiscovered as ``<app>/jobs.py``)."""

from __future__ import annotations

from typing import Any

import django_ojs

RECOVERABLE = "admin_e2e.recoverable"


@django_ojs.job(RECOVERABLE)
def recoverable(*args: Any, **kwargs: Any) -> dict[str, bool]:
    """Succeeds now: the dead-letter test stands for a bug that was fixed after the job died."""
    return {"recovered": True}
