"""Run the public OJS conformance suites against a real server.

Starts the example project under gunicorn with ``OJS["TEST_HOOKS"]`` on (for
``--reset-url``) and ``ojs_reaper`` beside it, on a database of its own,
creates an admin API key, and runs ``../shared/conformance/run.py``. Usable
from pytest (tests/conformance/test_conformance.py) and from the shell:

    python -m tests.conformance.harness --database postgres --level 0-4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPECTED_FAILURES = Path(__file__).with_name("expected-failures.txt")
# The project's own cases, in the public suites' format, for the wire its extensions
# add (docs/reference/http): an SDK author runs them with the same run.py.
EXTENSION_CASES = Path(__file__).with_name("extensions")
POSTGRES_ADMIN_URL = os.environ.get("OJS_CONFORMANCE_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres")


# The shared suites live beside the checkout; without them the runs they feed
# fail, naming where to get them, unless OJS_SKIP_CONFORMANCE=1 says to skip.
SKIP_VARIABLE = "OJS_SKIP_CONFORMANCE"


def conformance_dir() -> Path | None:
    """``OJS_CONFORMANCE_DIR`` if set (and nothing else), else ``../shared/conformance``; None if no run.py there."""
    path = Path(os.environ.get("OJS_CONFORMANCE_DIR") or ROOT.parent / "shared" / "conformance")
    return path if (path / "run.py").is_file() else None


def missing_suites_message() -> str:
    where = os.environ.get("OJS_CONFORMANCE_DIR") or str(ROOT.parent / "shared" / "conformance")
    return (
        f"the OJS conformance suites are not at {where} (no run.py there): put the shared "
        "directory beside the checkout (../shared/conformance) or set OJS_CONFORMANCE_DIR to "
        f"the suites' directory; {SKIP_VARIABLE}=1 skips the runs that need them"
    )


def skip_missing_suites() -> bool:
    """Whether a run whose shared suites are missing is skipped (explicitly asked) rather than failed."""
    return os.environ.get(SKIP_VARIABLE, "") not in ("", "0")


@dataclass
class Stack:
    url: str
    api_key: str
    database_url: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def fresh_database(
    kind: str, *, prefix: str = "ojs_conformance", admin_url: str = POSTGRES_ADMIN_URL
) -> Iterator[str]:
    """A new, empty database named ``<prefix>_<random>`` for one run; dropped afterwards.

    ``admin_url`` names the PostgreSQL server and a database to connect to for
    CREATE/DROP DATABASE; that database itself is never touched.
    """
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="ojs-conformance-") as directory:
            yield f"sqlite:///{directory}/conformance.sqlite3"
        return
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_libpq(admin_url), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(_libpq(admin_url), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _libpq(url: str) -> str:
    return url.replace("postgres://", "postgresql://", 1)


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    return result.stdout.strip()


@contextlib.contextmanager
def running_stack(database_url: str, log_dir: Path) -> Iterator[Stack]:
    """gunicorn + ojs_reaper on ``database_url``, stopped (SIGTERM) on exit."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "OJS_TEST_HOOKS": "1",
        "OJS_AUTH_REQUIRED": "1",
        "OJS_REAPER_INTERVAL": "0.1",
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
    }
    _manage(env, "migrate", "--verbosity", "0")
    api_key = _manage(env, "ojs_create_api_key", "conformance", "--scope", "admin", "--quiet")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_dir.mkdir(parents=True, exist_ok=True)
    processes = []
    try:
        for name, command in (
            ("gunicorn", [sys.executable, "-m", "gunicorn", "example_project.wsgi", "--bind", f"127.0.0.1:{port}",
                          "--workers", "2", "--access-logfile", "-"]),
            ("reaper", [sys.executable, "manage.py", "ojs_reaper"]),
        ):
            log = open(log_dir / f"{name}.log", "w")
            processes.append((subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log))
        _wait_until_up(f"{url}/ojs/v1/health")
        yield Stack(url=url, api_key=api_key, database_url=database_url)
    finally:
        for process, _ in processes:
            process.terminate()
        for process, log in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
            log.close()


def _wait_until_up(health_url: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(health_url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the server did not answer {health_url} within {timeout}s")


def run_suites(stack: Stack, runner_dir: Path, levels: str, report: Path) -> subprocess.CompletedProcess:
    """Run the suites of ``levels``: one range (``0-2``) or several (``0-2,4``).

    run.py takes one range per run, so each range is a run of its own against
    the same server (each case resets the store first), with its own report
    (``report-0-2.json``); the result fails if any run fails.

    A failed case that *waits* (a ``delay_ms`` step or a WAIT: it races the
    server's timers -- a retry due in 1 s fetched 1.2 s later, a reaper tick
    of 0.1 s -- against the runner's fixed sleeps) is run once more on its
    own, and passes only if that run passes; the output names it either way.
    A failed case that does not wait gets no second run: nothing but our
    server decides it.
    """
    reports = {level: report.with_name(f"{report.stem}-{level}{report.suffix}") for level in levels.split(",")}
    runs = [_run(stack, runner_dir, path, "--level", level) for level, path in reports.items()]
    # Only this call's reports: an older one left in the directory says nothing of this run.
    timed, untimed = _failed_cases(runner_dir, [path for path in reports.values() if path.exists()])
    # A run that failed without writing its report failed for a reason no case names: never retried.
    unexplained = any(run.returncode and not path.exists() for run, path in zip(runs, reports.values(), strict=True))
    if max(run.returncode for run in runs) != 0 and timed and not untimed and not unexplained:
        again = _run(stack, runner_dir, report.with_name(f"{report.stem}-rerun{report.suffix}"),
                     *(arg for case in timed for arg in ("--test", case)))
        verdict = "passed the second time" if again.returncode == 0 else "failed again"
        again.stdout += f"\nTimed cases that failed the first run, run once more: {' '.join(timed)}: {verdict}.\n"
        if again.returncode == 0:
            for run in runs:
                run.returncode = 0
        runs.append(again)
    return subprocess.CompletedProcess(
        runs[0].args,
        max(run.returncode for run in runs),
        "".join(run.stdout for run in runs),
        "".join(run.stderr for run in runs),
    )


def run_extension_cases(stack: Stack, runner_dir: Path, report: Path) -> subprocess.CompletedProcess:
    """Run the project's extension cases (``tests/conformance/extensions``) with the public runner."""
    return _run(stack, runner_dir, report, "--suites", str(EXTENSION_CASES))


def _run(stack: Stack, runner_dir: Path, report: Path, *selection: str) -> subprocess.CompletedProcess:
    command = [
        sys.executable, str(runner_dir / "run.py"),
        "--url", stack.url,
        *selection,
        "--header", f"Authorization: Bearer {stack.api_key}",
        "--reset-url", f"{stack.url}/ojs/v1/_test/reset",
        "--xfail", str(EXPECTED_FAILURES),
        "--json", str(report),
    ]
    return subprocess.run(command, capture_output=True, text=True)


def _failed_cases(runner_dir: Path, reports: Iterable[Path]) -> tuple[list[str], list[str]]:
    """The failed (or errored) cases of these reports: (those that wait, those that do not)."""
    timed, untimed = [], []
    for path in reports:
        for case in json.loads(path.read_text()).get("tests", []):
            status = case.get("status")
            if status in ("pass", "xfail", "skip", "skipped"):
                continue
            steps = json.loads((runner_dir / case["file_path"]).read_text()).get("steps", [])
            waits = any(step.get("delay_ms") or step.get("action") == "WAIT" for step in steps)
            # A listed expected failure that passes is reported as "fail" too; its
            # rerun fails the same way, so a second run cannot hide it.
            (timed if waits else untimed).append(case["test_id"])
    return timed, untimed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--level", default="0-4", help="ranges, comma-separated: 0-2,4")
    parser.add_argument("--artifacts", type=Path, default=ROOT / "test-artifacts" / "conformance")
    args = parser.parse_args()
    runner_dir = conformance_dir()
    if runner_dir is None:
        print(missing_suites_message(), file=sys.stderr)
        return 2
    artifacts = args.artifacts / args.database
    with fresh_database(args.database) as database_url, running_stack(database_url, artifacts) as stack:
        result = run_suites(stack, runner_dir, args.level, artifacts / "report.json")
    print(result.stdout + result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
