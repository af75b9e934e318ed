"""Waiting for a condition, never for a fixed time (docs/contributing.md): usable with or without pytest."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# How long a test waits for something that takes a second or two on an idle
# machine before it calls it failed: CI is two cores under a load of 10 or more.
# ``timeout`` arguments only bound a failure: make them generous, never a wait.
PATIENCE = 120


class WaitTimeout(AssertionError):
    """The condition did not come true in time (a test failure under pytest)."""


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something truthy; raise ``WaitTimeout`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)
