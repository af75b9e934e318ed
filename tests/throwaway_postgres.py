"""A PostgreSQL cluster of a test's own, for tests that stop, restart or crash the database.

The machine's PostgreSQL is shared: no test may stop or reconfigure it. A
test that needs an outage runs ``initdb`` in a temporary directory and
starts a postmaster on a free port of 127.0.0.1 (trust auth, fsync off),
logging to a file the test reads (``log_lock_waits`` is on, so lock waits
and every "deadlock detected" are there).

The cluster is always stopped and its directory removed: by ``cleanup()``
(the ``postgres_cluster`` fixture's finalizer), by an atexit hook, and by a
watchdog process that holds a pipe from this one and stops the cluster
when the pipe closes, which happens however this process ends (SIGKILL
included).

As root (CI containers) the PostgreSQL binaries run as the ``postgres``
user: initdb and pg_ctl refuse to run as root.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

BIN_DIR = Path(os.environ.get("OJS_PG_BIN_DIR", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "postgres"
START_TIMEOUT = 120  # seconds; crash recovery after an immediate stop on a busy machine

# Fast and observable: the data lives for one test. An immediate stop crashes
# PostgreSQL, not the machine: with fsync off the kernel still holds every
# write, but an asynchronous commit (synchronous_commit off) would be lost
# after the client was told it happened, so commits stay synchronous.
DEFAULT_SETTINGS: dict[str, str] = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "'32MB'",
    "log_lock_waits": "on",
    # Whole statements in a deadlock's DETAIL, not their first 1,024 bytes.
    "track_activity_query_size": "'16kB'",
    "log_line_prefix": "'%m [%p] '",
    "log_timezone": "'UTC'",
    "logging_collector": "off",
}

# Runs in its own session, so a Ctrl+C to the test's process group does not
# stop it before it has done its work: wait for EOF on stdin, then stop the
# cluster and remove its directory.
_WATCHDOG = """
import shutil, subprocess, sys
pg_ctl, data, root, user = sys.argv[1:5]
sys.stdin.buffer.read()
subprocess.run([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], user=user or None,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
shutil.rmtree(root, ignore_errors=True)
"""


def available() -> str | None:
    """Why a throwaway cluster cannot run here, or None if it can."""
    if not (BIN_DIR / "initdb").exists():
        return f"no PostgreSQL binaries in {BIN_DIR} (set OJS_PG_BIN_DIR)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            return "running as root without a 'postgres' user to run PostgreSQL as"
    return None


@contextlib.contextmanager
def cluster_for_tests() -> Iterator[ThrowawayCluster]:
    """A started cluster, removed afterwards; the test is skipped where one cannot run (failed in CI)."""
    skip_unless_available()
    with ThrowawayCluster() as cluster:
        yield cluster


def skip_unless_available() -> None:
    """Skip the calling test where a cluster cannot run; fail it in CI (``CI`` set), where one must."""
    import pytest

    reason = available()
    if reason:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThrowawayCluster:
    """One temporary PostgreSQL cluster: start, stop, restart, read its log, clean up."""

    def __init__(self, settings: Mapping[str, str] | None = None):
        self.settings = {**DEFAULT_SETTINGS, **(settings or {})}
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="ojs-pg-"))
        self.data = self.root / "data"
        self.log_path = self.root / "postgresql.log"
        self._user = SUPERUSER if os.geteuid() == 0 else None
        self._initialised = False
        self._watchdog: subprocess.Popen | None = None
        self._cleaned = False
        atexit.register(self.cleanup)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the postmaster (creating the cluster the first time); return once it accepts connections."""
        if not self._initialised:
            self._initdb()
        self._pg_ctl("start", "-l", str(self.log_path), "-t", str(START_TIMEOUT))

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``: "smart", "fast" (clients disconnected) or "immediate" (a crash)."""
        self._pg_ctl("stop", "-m", mode, "-t", str(START_TIMEOUT))

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def is_running(self) -> bool:
        return self._run(self._bin("pg_ctl"), "-D", str(self.data), "status", check=False).returncode == 0

    def cleanup(self) -> None:
        """Stop the cluster (immediately) and remove its directory; safe to call twice."""
        if self._cleaned:
            return
        self._cleaned = True
        atexit.unregister(self.cleanup)
        if self._initialised and self.is_running():
            self._run(self._bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        if self._watchdog is not None:
            self._watchdog.stdin.close()
            self._watchdog.wait(60)

    def __enter__(self) -> ThrowawayCluster:
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cleanup()

    # -- using it ----------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        return f"postgres://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres", **kwargs):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname=database, **kwargs)

    def create_database(self, name: str) -> str:
        """Create ``name``; return its URL."""
        with self.connect(autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_count(self, text: str) -> int:
        return self.log().count(text)

    # -- internals ---------------------------------------------------------------------

    def _initdb(self) -> None:
        if self._user:
            shutil.chown(self.root, user=self._user)
        self._run(
            self._bin("initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        lines = [f"port = {self.port}", f"unix_socket_directories = '{self.root}'"]
        lines += [f"{name} = {value}" for name, value in self.settings.items()]
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# tests/throwaway_postgres.py\n" + "\n".join(lines) + "\n")
        self._initialised = True
        self._watchdog = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WATCHDOG,
                str(self._bin("pg_ctl")),
                str(self.data),
                str(self.root),
                self._user or "",
            ],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )

    def _pg_ctl(self, *args: str) -> None:
        self._run(self._bin("pg_ctl"), "-D", str(self.data), "-w", *args)

    def _bin(self, name: str) -> Path:
        return BIN_DIR / name

    def _run(self, *args: object, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [str(arg) for arg in args],
            user=self._user,
            cwd=self.root,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, args))} failed ({result.returncode}):\n{result.stdout}")
        return result
