"""The tutorials run as written: a new project in an empty directory, step by step, with a live server.

docs/tutorial.md and then docs/tutorial-workflow.md, which builds on the
project of the first, are followed in order in one temporary directory, with
this environment's Python (where django-ojs is installed) first on the PATH:
their ``file=`` blocks are written (or appended, ``append``) to the project,
their ``run`` shell blocks run with bash (``set -e``: a failing command fails
the test; curl fails on an HTTP error, through a .curlrc, but in a block
flagged ``http-error``, whose page says the answer may be one), and an ``output``
block after one must be what it printed (``...`` elides). ``background``
blocks start the worker, the reaper and the development server, which must
still be running at the end and stop cleanly on SIGTERM (the django-ojs
commands with status 0); ``background restart`` first stops the process of
the same command, as a reader stops a worker to load new handlers. An
``output log=COMMAND`` block shows what such a process logged: once every
process has stopped, each of its lines must be a line of the log of a process
of that command (``ojs_worker``), in any order, among others. Shell
variables a block sets (``KEY=...``) are kept for the blocks after it. The
server listens on a free port: ``127.0.0.1:8000`` in the pages stands for it.

Then what the second tutorial says happened is read from the project's own
database: the workflow completed, the import reported its progress on the
way, the price syncs kept to their rate limit, and the unique job was stored
once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .samples import ROOT, Sample, commands, samples_of

TUTORIALS = [ROOT / "docs" / "tutorial.md", ROOT / "docs" / "tutorial-workflow.md"]
ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=", re.MULTILINE)
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the server exited with {process.returncode}"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# What differs from one run to the next in what a command prints: ids, and numbers (times, counts).
VARYING = re.compile(f"({UUID.pattern}|[0-9]+)")
WRAPPED = re.compile(r"\n[ \t]+")


def printed_as_shown(shown: str, printed: str) -> bool:
    """Whether a run block printed what the page's output block shows.

    ``...`` stands for anything; an id stands for any id and a number for any
    number (the page shows one run's ids, times and counts). A line that starts
    with a space continues the line above: a long reply wrapped to fit the page.
    """
    pattern = []
    for index, piece in enumerate(VARYING.split(WRAPPED.sub("", shown.strip()))):
        if index % 2 == 0:  # text between ids and numbers, with ... for anything
            pattern.append(".*".join(re.escape(text) for text in piece.split("...")))
        else:
            pattern.append(UUID.pattern if UUID.fullmatch(piece) else "[0-9]+")
    return re.fullmatch("".join(pattern), printed.strip(), re.DOTALL) is not None


class Workspace:
    def __init__(self, directory: Path, port: int):
        self.directory = directory
        self.port = port
        self.state = directory / ".tutorial-state.sh"
        self.state.write_text("")
        (directory / ".curlrc").write_text("fail-with-body\nshow-error\n")
        self.plain_curl = directory / ".curl-plain"  # no .curlrc: an HTTP error is an answer
        self.plain_curl.mkdir()
        self.env = {
            key: value for key, value in os.environ.items()
            if not key.startswith(("DJANGO_", "OJS_")) and key not in ("DATABASE_URL", "PYTHONPATH")
        }
        self.env.update(
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            CURL_HOME=str(directory),
            PYTHONUNBUFFERED="1",
        )
        self.background: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        self.logs: list[tuple[str, Path]] = []  # of every process started, stopped ones included
        self.logged: list[Sample] = []  # output log=... blocks, checked once every process has stopped
        self.printed = ""  # what the last run block printed

    def local(self, code: str) -> str:
        return code.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")

    def write(self, sample: Sample) -> None:
        path = self.directory / sample.options["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        if "append" in sample.flags:
            assert path.is_file(), f"{sample.id} appends to {path.name}, which does not exist yet"
            path.write_text(path.read_text() + "\n" + sample.code)
        else:
            path.write_text(sample.code)

    def run(self, sample: Sample) -> None:
        # The prelude runs first (hidden: it waits, or finds an id), and prints nothing the page shows.
        prelude = f"{{\n{self.local(sample.prelude)}\n}} > /dev/null\n" if sample.prelude else ""
        script = self.local(sample.code)
        keep = sorted(set(ASSIGNMENT.findall(sample.prelude + "\n" + sample.code)))
        saved = f"declare -p {' '.join(keep)} >> {self.state}\n" if keep else ""
        env = self.env
        if "http-error" in sample.flags:  # the page says its answer may be an error: curl as a reader runs it
            env = {**env, "CURL_HOME": str(self.plain_curl)}
        done = subprocess.run(
            ["bash", "-c", f"set -e -o pipefail\nsource {self.state}\n{prelude}{script}\n{saved}"],
            cwd=self.directory, env=env, capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 0, f"{sample.id} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        self.printed = done.stdout

    def check_output(self, sample: Sample) -> None:
        assert printed_as_shown(sample.code, self.printed), (
            f"{sample.id}: the block above printed\n{self.printed}\nnot what the page shows:\n{sample.code}"
        )

    def check_logged(self) -> list[str]:
        """The lines of the ``output log=COMMAND`` blocks that no process of that command logged."""
        missing = []
        for sample in self.logged:
            name = sample.options["log"]
            logs = [log for command, log in self.logs if f" {name}" in f" {command}"]
            assert logs, f"{sample.id}: no process of {name} was started before this block"
            lines = [line for log in logs for line in log.read_text(errors="replace").splitlines()]
            missing += [
                f"{sample.id}: no {name} logged a line like {shown!r}"
                for shown in sample.code.splitlines()
                if shown.strip() and not any(printed_as_shown(shown, line) for line in lines)
            ]
        return missing

    def start(self, sample: Sample) -> None:
        for words in commands(sample.code):
            if words[-1] == "runserver":  # the page's server, on this test's port
                words = [*words, f"127.0.0.1:{self.port}", "--noreload"]
            name = words[2] if len(words) > 2 else words[0]
            if "restart" in sample.flags:
                self.stop(name)
            log = self.directory / f".{name}-{len(self.logs)}.log"
            process = subprocess.Popen(
                words, cwd=self.directory, env=self.env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.background.append((" ".join(words), process, log))
            self.logs.append((" ".join(words), log))
            if "runserver" in words:
                wait_for_port(self.port, process, time.monotonic() + 60)

    def stop(self, name: str) -> None:
        """Stop the running process of this command (``ojs_worker``) with SIGTERM, as a reader's Ctrl+C would."""
        started = [entry for entry in self.background if f" {name}" in f" {entry[0]}"]
        running = [entry for entry in started if entry[1].poll() is None]
        assert running, f"nothing runs {name} to restart; " + "".join(
            f"{command} ended with {process.returncode}:\n{log.read_text()[-3000:]}\n" for command, process, log in started)
        for command, process, log in running:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0, f"{command} stopped with {process.returncode}:\n{log.read_text()[-3000:]}"
            self.background.remove((command, process, log))

    def stop_all(self) -> list[str]:
        """SIGTERM to every background process; what did not stop cleanly."""
        problems = []
        for command, process, log in self.background:
            if process.poll() is not None:
                problems.append(f"{command} had exited ({process.returncode}):\n{log.read_text()[-3000:]}")
                continue
            process.send_signal(signal.SIGTERM)
        for command, process, log in self.background:
            try:
                code = process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                problems.append(f"{command} did not stop within 60 s of SIGTERM")
                continue
            if " ojs_" in command and code != 0:
                problems.append(f"{command} stopped with {code}:\n{log.read_text()[-3000:]}")
        return problems

    def follow(self, page: Path) -> list[str]:
        ran = []
        for sample in samples_of(page):
            if sample.kind == "file":
                self.write(sample)
            elif sample.kind == "run":
                self.run(sample)
            elif sample.kind == "output" and "log" in sample.options:
                self.logged.append(sample)
            elif sample.kind == "output":
                self.check_output(sample)
            elif sample.kind == "background":
                self.start(sample)
            elif sample.kind not in ("text", "skip"):
                raise AssertionError(f"{sample.id}: {sample.kind} samples do not belong to a tutorial")
            ran.append(sample.kind)
        return ran


def test_the_tutorials_run_as_written(tmp_path):
    workspace = Workspace(tmp_path, free_port())
    try:
        first = workspace.follow(TUTORIALS[0])
        second = workspace.follow(TUTORIALS[1])
        # The reader's last ask was enqueued a moment ago; a reader would let the worker
        # take it before pressing Ctrl+C, so the test waits for that too, not a fixed time.
        wait_until_every_job_finished(tmp_path / "db.sqlite3", time.monotonic() + 120)
    finally:
        problems = workspace.stop_all()
    assert not problems, "\n".join(problems)
    missing = workspace.check_logged()
    assert not missing, "\n".join(missing)
    assert first.count("run") >= 4 and first.count("background") >= 2 and first.count("file") >= 3
    assert second.count("run") >= 4 and second.count("output") >= 2 and second.count("background") >= 1
    the_second_tutorial_happened(tmp_path / "db.sqlite3")


def wait_until_every_job_finished(database: Path, deadline: float) -> None:
    unfinished: list[tuple[str, str]] = []
    while time.monotonic() < deadline:
        with sqlite3.connect(database) as db:
            unfinished = db.execute(
                "SELECT type, state FROM django_ojs_job WHERE state NOT IN ('completed', 'discarded', 'cancelled')"
            ).fetchall()
        if not unfinished:
            return
        time.sleep(0.2)
    raise AssertionError(f"jobs still unfinished when the tutorial's worker would stop: {unfinished}")


def the_second_tutorial_happened(database: Path) -> None:
    """What docs/tutorial-workflow.md says its reader saw, read from the project's own database."""
    db = sqlite3.connect(database)
    db.row_factory = sqlite3.Row

    def jobs(job_type: str) -> list[sqlite3.Row]:
        return db.execute("SELECT * FROM django_ojs_job WHERE type = ? ORDER BY started_at", (job_type,)).fetchall()

    [workflow] = db.execute("SELECT * FROM django_ojs_workflow WHERE name = 'acme catalogue'").fetchall()
    assert workflow["state"] == "completed"

    # The import reported its progress on the way, and ended at 1.0.
    [imported] = jobs("shop.import_catalogue")
    assert imported["state"] == "completed"
    assert json.loads(imported["progress"])["progress"] == 1.0
    reported = [
        json.loads(row["data"])["progress_percent"]
        for row in db.execute("SELECT data FROM django_ojs_event WHERE type = 'job.progress' AND job_id = ?",
                              (imported["id"],))
    ]
    assert any(0 < percent < 100 for percent in reported), reported

    # Six price syncs, never more than two starts in any second (the supplier's rate limit).
    synced = jobs("shop.sync_price")
    assert [row["state"] for row in synced] == ["completed"] * 6
    starts = [dt.datetime.fromisoformat(row["started_at"]) for row in synced]
    for index, start in enumerate(starts):
        within_a_second = [other for other in starts[index:] if other - start < dt.timedelta(seconds=1)]
        assert len(within_a_second) <= 2, starts

    # The search index: once for the workflow's publish step, and once for the reader's two asks.
    rebuilt = jobs("shop.rebuild_search_index")
    assert 1 <= len(rebuilt) <= 2 and all(row["state"] == "completed" for row in rebuilt), [dict(row) for row in rebuilt]


@pytest.mark.parametrize(("printed", "matches"), [
    ("3 objects imported\n\n01a21acf-1111-7222-8333-444455556666 running\n", True),
    ("3 objects imported\n\n01a21acf-1111-7222-8333-444455556666 completed\n", False),
    ("3 objects imported\n\nnot-an-id running\n", False),
    ("running\n", False),
])
def test_an_output_block_stands_for_ids_numbers_and_what_it_elides(printed, matches):
    shown = "... objects imported\n\n01a21b01-69f3-7c51-8f0e-0c2f1b4f9f0a running"
    assert printed_as_shown(shown, printed) is matches


@pytest.mark.parametrize(("printed", "matches"), [
    ('{"job":{"id":"01a21acf-1111-7222-8333-444455556666","state":"completed","attempt":2,"errors":[]}}', True),
    ('{"job":{"id":"01a21acf-1111-7222-8333-444455556666","state":"completed",\n "attempt":2,"errors":[]}}', False),
    ('{"job":{"id":"01a21acf-1111-7222-8333-444455556666","state":"failed","attempt":2,"errors":[]}}', False),
])
def test_a_line_that_starts_with_a_space_continues_the_one_above(printed, matches):
    shown = '{"job":{"id":"01a21b01-69f3-7c51-8f0e-0c2f1b4f9f0a","state":"completed",\n "attempt":2,...}}'
    assert printed_as_shown(shown, printed) is matches
