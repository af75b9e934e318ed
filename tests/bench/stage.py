"""Where the suite runs: its own database, Django set up on it, and the processes it starts.

The suite never touches a database it did not create: it makes
``ojs_bench_<random>`` on the PostgreSQL server of ``DATABASE_URL`` (only the
server part is used) and drops it at the end. Every process it starts is
stopped by its own PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.conformance.harness import fresh_database

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = "tests.bench.settings"
DEFAULT_SERVER = "postgres://postgres@127.0.0.1:5432/postgres"


class BenchError(RuntimeError):
    """A run that cannot give a true figure (a job lost or run twice, a process that failed)."""


@dataclass(frozen=True)
class Stage:
    database_url: str  # postgres://... for Django (django-environ)

    @property
    def dsn(self) -> str:
        """The same database for psycopg and asyncpg."""
        return self.database_url.replace("postgres://", "postgresql://", 1)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of every process the suite starts."""
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": SETTINGS,
            "DATABASE_URL": self.database_url,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "OJS_LOG_LEVEL": "WARNING",
            **extra,
        }


@contextlib.contextmanager
def bench_database(server_url: str, kind: str = "postgres") -> Iterator[Stage]:
    """A fresh ``ojs_bench_*`` database on ``server_url``'s server (or a temporary SQLite
    file for ``kind="sqlite"``), migrated, Django set up on it; dropped after.

    ``OJS_BENCH_DATABASE_PREFIX`` (``ojs_bench`` unless set; keep it starting so) names it
    after its owner on a server several people share."""
    admin_url = urllib.parse.urlsplit(server_url)._replace(path="/postgres").geturl()
    prefix = os.environ.get("OJS_BENCH_DATABASE_PREFIX", "ojs_bench")
    with fresh_database(kind, prefix=prefix, admin_url=admin_url) as database_url:
        stage = Stage(database_url)
        os.environ.update(DJANGO_SETTINGS_MODULE=SETTINGS, DATABASE_URL=database_url)
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        try:
            yield stage
        finally:
            from django.db import connections

            connections.close_all()


class Process:
    """A child process with its output in a temporary file; stopped by PID."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.argv = argv
        self._log: IO[bytes] = tempfile.TemporaryFile()
        self.popen = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.popen.pid

    @classmethod
    def manage(cls, stage: Stage, *args: str, **env: str) -> Process:
        return cls([sys.executable, str(ROOT / "manage.py"), *args], stage.env(**env))

    @classmethod
    def module(cls, stage: Stage, module: str, *args: str) -> Process:
        return cls([sys.executable, "-m", module, *args], stage.env())

    def output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then wait; SIGKILL if it does not exit in time (and say so)."""
        if self.running():
            self.popen.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)
            raise BenchError(
                f"{' '.join(self.argv[-3:])} did not exit in {timeout:g}s:\n{self.output()[-2000:]}"
            ) from None

    def close(self) -> None:
        if self.running():
            self.popen.kill()
            self.popen.wait(10)
        self._log.close()


@contextlib.contextmanager
def started(processes: list[Process]) -> Iterator[list[Process]]:
    """Close (kill if still running) every process on the way out, whatever happened."""
    try:
        yield processes
    finally:
        for process in processes:
            process.close()


def wait_for(condition: Callable[[], Any], timeout: float, what: str, processes: list[Process] = (),
             interval: float = 0.1) -> Any:
    """Poll until ``condition()`` is truthy; fail when a process died or time ran out."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        for process in processes:
            if not process.running():
                raise BenchError(f"{process.argv[-1]} exited ({process.popen.returncode}) while waiting for "
                                 f"{what}:\n{process.output()[-2000:]}")
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes (all their threads), from /proc."""
    total = 0
    for pid in pids:
        # The command name (field 2) may hold spaces: split after its closing parenthesis.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / _TICKS


def children(pid: int) -> list[int]:
    """The PIDs whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found
