"""The benchmark suite still runs: a --quick run of three sections gives a row with numbers per figure.

No speed is asserted here (speed lives in the suite's own table); this
keeps the suite from rotting while the code it measures changes. pgqueuer
takes part when it is installed (the ``bench`` extra), else ``--no-peer``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import psycopg
import pytest

from tests.helpers import database_url

from .stage import ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FIGURES = {
    "enqueue.bulk", "enqueue.single", "enqueue.single_tx",
    "worker.1x10", "worker.2x10", "worker.1x50", "worker.2x50",
    *(f"http.{name}.{kind}" for name in ("bare", "health", "push", "batch", "worker_loop", "batch_worker_loop",
                                         "turn_loop") for kind in ("rate", "cpu")),
}
NO_PEER = {"http"}  # pgqueuer has no HTTP API


def test_a_quick_run_reports_every_figure_with_its_floor_and_drops_its_database(tmp_path):
    peer = importlib.util.find_spec("pgqueuer") is not None
    out = tmp_path / "figures.jsonl"
    command = [sys.executable, "-m", "tests.bench.suite", "--quick", "--only", "enqueue,worker,http",
               "--server", database_url(), "--json", str(out), *([] if peer else ["--no-peer"])]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]

    run, *lines = [json.loads(line) for line in out.read_text().splitlines()]
    figures = {line["figure"]: line for line in lines}
    assert set(figures) == FIGURES
    for key, figure in figures.items():
        assert figure["ours"] > 0, figure
        assert figure["name"] in result.stdout  # its row in the table
        if key.startswith("http.bare."):  # the HTTP floor itself
            assert figure["floor"] is None, figure
        else:
            assert figure["floor"] > 0, figure
            assert figure["ratio_floor"] == pytest.approx(figure["ours"] / figure["floor"], rel=0.01), figure
        if key.split(".")[0] in NO_PEER:
            assert figure["pgqueuer"] is None and figure["pgqueuer_note"] == "no counterpart", figure
        elif peer:
            assert figure["pgqueuer"] > 0 and figure["ratio_pgqueuer"] > 0, figure
        else:
            assert figure["pgqueuer"] is None and figure["pgqueuer_note"] == "not run (--no-peer)", figure
    assert figures["http.push.cpu"]["targets"] == [
        {"target": "≤ 1.5× floor", "met": figures["http.push.cpu"]["ratio_floor"] <= 1.5}]
    assert [t["target"] for t in figures["worker.2x10"]["targets"]] == ["≥ 1.2× pgqueuer", "≥ 0.6× floor"]
    for loop in ("batch_worker_loop", "turn_loop"):
        assert [t["target"] for t in figures[f"http.{loop}.rate"]["targets"]] == ["≥ 0.7× floor"]
    assert run["run"]["events"] is True

    # The suite made its own database and dropped it.
    assert run["run"]["database"].startswith("ojs_bench_")
    server = database_url().rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1)
    with psycopg.connect(f"{server}/postgres") as conn:
        assert not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [run["run"]["database"]]).fetchone()


def test_the_level4_costs_still_run():
    """tests/bench/level4.py (the cost of a unique PUSH and a rate-limited FETCH) runs and prints each figure."""
    command = [sys.executable, "-m", "tests.bench.level4", "--operations", "5", "--runs", "1",
               "--server", database_url()]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("plain push", "unique push (new key)", "unique push (duplicate, ignore)",
                 "plain fetch", "rate-limited fetch (concurrency + window)"):
        assert name in result.stdout, result.stdout


def test_jobs_with_work_use_the_cpu_they_are_given_and_have_no_floor_or_peer(tmp_path):
    """--job-cpu-ms: the worker section's jobs spin that long (demo.spin), so a process works at most 1/ms of them a second."""
    out = tmp_path / "figures.jsonl"
    command = [sys.executable, "-m", "tests.bench.suite", "--quick", "--only", "worker", "--no-peer", "--jobs", "100",
               "--job-cpu-ms", "5", "--server", database_url(), "--json", str(out)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]

    _, *lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert {line["figure"] for line in lines} == {"worker.1x10", "worker.2x10", "worker.1x50", "worker.2x50"}
    for figure in lines:
        processes = int(figure["figure"].split(".")[1].split("x")[0])
        # Python holds the GIL while it spins: 5 ms of CPU a job is at most 200 jobs/s per process.
        assert 0 < figure["ours"] <= 200 * processes * 1.05, figure
        assert ", jobs of 5 ms CPU" in figure["name"], figure
        assert figure["floor"] is None and figure["pgqueuer"] is None and figure["targets"] == [], figure
