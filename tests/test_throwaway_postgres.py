"""tests/throwaway_postgres.py: a cluster of a test's own starts, restarts, logs, and always goes away."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.throwaway_postgres import cluster_for_tests, skip_unless_available
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.postgres


def accepts_connections(port: int) -> bool:
    try:
        psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", dbname="postgres", connect_timeout=2
        ).close()
    except psycopg.OperationalError:
        return False
    return True


def test_start_restart_both_ways_and_clean_up():
    with cluster_for_tests() as cluster:
        url = cluster.create_database("scratch")
        assert url == f"postgres://postgres@127.0.0.1:{cluster.port}/scratch"
        with cluster.connect("scratch", autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int)")
        for n, mode in enumerate(("fast", "immediate")):
            with cluster.connect("scratch", autocommit=True) as conn:
                conn.execute("INSERT INTO kept VALUES (%s)", [n])
            cluster.restart(mode)
            with cluster.connect("scratch") as conn:  # every commit the client saw is still there
                assert conn.execute("SELECT count(*) FROM kept").fetchone() == (n + 1,)
        assert "not properly shut down" in cluster.log()  # the immediate stop was a crash
        with cluster.connect(autocommit=True) as conn:
            assert conn.execute("SHOW log_lock_waits").fetchone() == ("on",)
            # A commit the client saw survives an immediate stop.
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        root, port = cluster.root, cluster.port
    assert not root.exists()
    assert not accepts_connections(port)


def test_the_cluster_goes_away_when_its_process_is_killed(tmp_path):
    """The watchdog: no finalizer or atexit hook runs after a SIGKILL, and still nothing is left."""
    skip_unless_available()
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from tests.throwaway_postgres import ThrowawayCluster\n"
            "cluster = ThrowawayCluster(); cluster.start()\n"
            "print(cluster.root, cluster.port, flush=True); time.sleep(600)",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        root, port = owner.stdout.readline().split()
        assert accepts_connections(int(port))
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    wait_until(
        lambda: not Path(root).exists() and not accepts_connections(int(port)),
        60,
        "the watchdog to stop the cluster and remove its directory",
    )
