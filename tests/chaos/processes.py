"""The real processes of a chaos or outage run: manage.py commands and gunicorn, logs in files.

Not tied to pytest: ``python -m tests.chaos`` uses them too. Every process
is started in a session of its own (so a signal meant for one reaches only
it) and is killed, by its pid, when the ``Fleet`` closes.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.waiting import WaitTimeout

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = "tests.chaos.settings"
_WORKER_STARTED = re.compile(r"worker (\S+) started \(pid (\d+)\)")


class Managed:
    """One started process: its role, label, log, and what became of it."""

    def __init__(self, role: str, label: str, command: list[str], env: dict[str, str], log_path: Path):
        self.role = role
        self.label = label
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.started_at = time.time()
        self.popen = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.pid = self.popen.pid
        self._worker_id: str | None = None

    def __repr__(self) -> str:
        return f"{self.label} (pid {self.pid})"

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def worker_id(self) -> str | None:
        """The id an ``ojs_worker`` logged when it registered, once it has."""
        if self._worker_id is None and self.role == "worker":
            match = _WORKER_STARTED.search(self.output())
            if match:
                self._worker_id = match.group(1)
        return self._worker_id

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, signum: int) -> None:
        if self.alive():
            os.kill(self.pid, signum)

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise WaitTimeout(
                f"{self} did not exit within {timeout:g}s; its log ends:\n{self.output()[-2000:]}"
            ) from None

    def close(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGCONT)  # a stopped process dies only once it runs
            os.kill(self.pid, signal.SIGKILL)
            self.popen.wait(30)
        self._log.close()


class Fleet:
    """Starts manage.py commands (and gunicorn) against one database; closes them all at the end."""

    def __init__(self, database_url: str, log_dir: Path, env: dict[str, str] | None = None):
        self.log_dir = log_dir
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": SETTINGS,
            "DATABASE_URL": database_url,
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.started: list[Managed] = []
        self._numbers: dict[str, int] = {}

    def manage(self, role: str, *args: str, env: dict[str, str] | None = None) -> Managed:
        """``manage.py <args>`` in the background, e.g. ``manage("worker", "ojs_worker", "-c", "10")``."""
        return self._start(role, [sys.executable, str(ROOT / "manage.py"), *args], env)

    def gunicorn(self, port: int, workers: int = 1, env: dict[str, str] | None = None) -> Managed:
        binary = Path(sys.executable).with_name("gunicorn")
        command = [
            str(binary),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--timeout",
            "60",
            "example_project.wsgi:application",
        ]
        return self._start("api", command, env)

    def run(self, *args: str, timeout: float = 300) -> str:
        """``manage.py <args>`` to completion; its standard output (raises if it fails)."""
        result = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode:
            output = (result.stdout + result.stderr)[-3000:]
            raise RuntimeError(f"manage.py {' '.join(args)} failed ({result.returncode}):\n{output}")
        return result.stdout

    def _start(self, role: str, command: list[str], env: dict[str, str] | None) -> Managed:
        number = self._numbers[role] = self._numbers.get(role, 0) + 1
        label = f"{role}-{number}"
        process = Managed(role, label, command, {**self.env, **(env or {})}, self.log_dir / f"{label}.log")
        self.started.append(process)
        return process

    def close(self) -> None:
        for process in self.started:
            process.close()
