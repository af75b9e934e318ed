"""The tutorial runs as written: a new project in an empty directory, step by step, with a live server.

docs/tutorial.md is followed in order in a temporary directory, with this
environment's Python (where django-ojs is installed) first on the PATH: its
``file=`` blocks are written (or appended, ``append``) to the project, its
``run`` shell blocks run with bash (``set -e``: a failing command fails the
test; curl fails on an HTTP error, through a .curlrc), its ``background``
blocks start the worker, the reaper and the development server, which must
still be running at the end and stop cleanly on SIGTERM (the django-ojs
commands with status 0). Shell variables a block sets (``KEY=...``) are kept
for the blocks after it. The server listens on a free port: ``127.0.0.1:8000``
in the page stands for it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .samples import ROOT, Sample, commands, samples_of

TUTORIAL = ROOT / "docs" / "tutorial.md"
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


class Workspace:
    def __init__(self, directory: Path, port: int):
        self.directory = directory
        self.port = port
        self.state = directory / ".tutorial-state.sh"
        self.state.write_text("")
        (directory / ".curlrc").write_text("fail-with-body\nshow-error\n")
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
        script = self.local(sample.prelude + "\n" + sample.code)
        keep = sorted(set(ASSIGNMENT.findall(script)))
        saved = f"declare -p {' '.join(keep)} >> {self.state}\n" if keep else ""
        done = subprocess.run(
            ["bash", "-c", f"set -e -o pipefail\nsource {self.state}\n{script}\n{saved}"],
            cwd=self.directory, env=self.env, capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 0, f"{sample.id} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"

    def start(self, sample: Sample) -> None:
        for words in commands(sample.code):
            if words[-1] == "runserver":  # the page's server, on this test's port
                words = [*words, f"127.0.0.1:{self.port}", "--noreload"]
            log = self.directory / f".{words[2] if len(words) > 2 else words[0]}.log"
            process = subprocess.Popen(
                words, cwd=self.directory, env=self.env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.background.append((" ".join(words), process, log))
            if "runserver" in words:
                wait_for_port(self.port, process, time.monotonic() + 60)

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


def test_the_tutorial_runs_as_written(tmp_path):
    workspace = Workspace(tmp_path, free_port())
    ran = []
    try:
        for sample in samples_of(TUTORIAL):
            if sample.kind == "file":
                workspace.write(sample)
            elif sample.kind == "run":
                workspace.run(sample)
            elif sample.kind == "background":
                workspace.start(sample)
            elif sample.kind not in ("text", "skip"):
                raise AssertionError(f"{sample.id}: {sample.kind} samples do not belong to the tutorial")
            ran.append(sample.kind)
    finally:
        problems = workspace.stop_all()
    assert not problems, "\n".join(problems)
    assert ran.count("run") >= 4 and ran.count("background") >= 2 and ran.count("file") >= 3
