"""Real ojs_reaper processes, started as the worker tests start theirs."""

from tests.worker.conftest import processes  # noqa: F401
