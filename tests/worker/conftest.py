"""Real worker processes on the real test database, driven with real signals.

The processes run ``manage.py ojs_worker`` / ``ojs_reaper`` with
``tests.worker.settings`` against the test database pytest-django created;
the tests use ``transactional_db`` so what they write is committed and
visible to them. Every process a test starts is killed when it ends.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.waiting import PATIENCE, wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.postgres


class Process:
    """A manage.py command running in the background, its output in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, prefix: list[str] | None = None):
        self.args = args
        self.log_path = log
        self._log = log.open("wb")
        self.popen = subprocess.Popen(
            [*(prefix or []), sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )
        self.pid = self.popen.pid

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_output(self, pattern: str, timeout: float = PATIENCE) -> re.Match:
        return wait_until(lambda: re.search(pattern, self.output), timeout, f"{pattern!r} in the output of {self.args[0]}")

    def send(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.args[0]} did not exit within {timeout}s; output:\n{self.output[-3000:]}")

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)
        self._log.close()


@pytest.fixture
def processes(transactional_db, tmp_path) -> Iterator[Callable[..., Process]]:
    """``processes("ojs_worker", "--concurrency", "2", env={...})`` starts one; all die with the test."""
    settings = connection.settings_dict
    database_url = (
        f"postgres://{settings['USER']}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"
    )
    started: list[Process] = []

    def start(*args: str, env: dict[str, str] | None = None, prefix: list[str] | None = None) -> Process:
        full_env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.worker.settings",
            "DATABASE_URL": database_url,
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        process = Process(list(args), full_env, tmp_path / f"{args[0]}-{len(started)}.log", prefix)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def worker(processes) -> Callable[..., Process]:
    """Start ``ojs_worker`` with fast heartbeats and wait until it has registered."""

    def start(*flags: str, env: dict[str, str] | None = None, ready: bool = True) -> Process:
        process = processes("ojs_worker", "--heartbeat-interval", "0.5", *flags, env=env)
        if ready:
            process.wait_for_output(r"worker \S+ started")
        return process

    return start


def heartbeats_pass(count: int = 2) -> None:
    """Wait until the one registered worker has sent ``count`` more heartbeats.

    Time measured by the worker's own clock, not the wall's: on a loaded
    machine a second of wall time may be no time at all for the worker.
    """
    from django_ojs.models import Worker

    seen = [Worker.objects.values_list("last_heartbeat_at", flat=True).get()]

    def advanced() -> bool:
        latest = Worker.objects.values_list("last_heartbeat_at", flat=True).get()
        if latest != seen[-1]:
            seen.append(latest)
        return len(seen) > count

    wait_until(advanced, PATIENCE, f"{count} more heartbeats")


@pytest.fixture
def reaper(processes) -> Callable[..., Process]:
    def start(env: dict[str, str] | None = None) -> Process:
        return processes("ojs_reaper", "--interval", "0.1", env=env)

    return start
