"""A/B of whole revisions in one run: CPU and instructions per PUSH, enqueue or bare request.

    python -m tests.bench.revisions push|enqueue|bulk|bare REV [REV ...] [--count 150] [--rounds 6] [--instructions]

Each revision (``.`` is the working tree) runs in a process of its own from a
checkout of it (``git worktree``, removed after), on a bench database of its own,
doing ``--count`` of the step per round: a single ``POST /ojs/v1/jobs`` through the
WSGI handler as gunicorn calls it (``push``), ``django_ojs.enqueue`` in process
(``enqueue``), ``django_ojs.enqueue_many`` of 1,000 jobs (``bulk``), ``GET /bench/bare``
(``bare``). The processes take their rounds in
turn, the order rotated each round; the report is each one's median per step and
its ratio to the first revision's, in the process's CPU time and in wall time (which
holds PostgreSQL's work and the commits, and the machine's other load).

``--instructions`` runs each process under ``valgrind --tool=callgrind`` and counts
the instructions each round executes (collection on only while it runs): a
figure the machine's load does not move, which a shared machine's CPU time is
not. The per-process caches that refresh by the clock (queue settings, the
maintenance state, API keys, the prepared statements' replanning) are given
hours, not seconds, on every side alike: under callgrind's slowdown they would
otherwise refresh every few steps and weigh as they never do at full speed.
Needs ``valgrind`` and a C compiler (for the few lines that switch collection).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from .stage import DEFAULT_SERVER, ROOT, bench_database

COLLECTION = """#include <valgrind/callgrind.h>
void on(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void off(const char *name) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(name); }
"""
HOURS = 36000
# Jobs in one ``bulk`` step.
BULK = 1000
SERVE = """import importlib.util, sys
spec = importlib.util.spec_from_file_location("tests.bench.revisions", "{path}")
module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.serve()"""


def serve() -> None:
    """One side: steps on stdin (``push 150``), a line ``<CPU µs> <instructions> <wall µs>`` per step out."""
    collection = ctypes.CDLL(os.environ["OJS_BENCH_COLLECTION"]) if os.environ.get("OJS_BENCH_COLLECTION") else None
    with bench_database(os.environ.get("DATABASE_URL", DEFAULT_SERVER)):
        import gc

        from django.conf import settings
        from django.core.handlers.wsgi import WSGIHandler

        import django_ojs
        from django_ojs.api import auth
        from django_ojs.conf import ojs_settings
        from django_ojs.core.pg import prepared
        from django_ojs.models import ApiKey

        from . import store

        if collection:
            settings.OJS = {**getattr(settings, "OJS", {}), "QUEUE_CONFIG_TTL": HOURS, "API_KEY_CACHE_SECONDS": HOURS}
            ojs_settings.reload()
            prepared.REPLAN_SECONDS = HOURS
            auth.LAST_USED_RESOLUTION *= HOURS
        _, key = ApiKey.objects.issue("bench", ["admin"])
        handler = WSGIHandler()
        body = json.dumps({"type": store.NOOP, "args": []}).encode()

        def request(method: str, path: str, data: bytes = b"") -> str:
            statuses: list[str] = []
            handler({
                "REQUEST_METHOD": method, "PATH_INFO": path, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
                "wsgi.input": io.BytesIO(data), "wsgi.url_scheme": "http", "CONTENT_LENGTH": str(len(data)),
                "CONTENT_TYPE": "application/openjobspec+json", "HTTP_AUTHORIZATION": f"Bearer {key}",
                "HTTP_HOST": "127.0.0.1",
            }, lambda status, headers: statuses.append(status))
            return statuses[0]

        def push() -> None:
            status = request("POST", "/ojs/v1/jobs", body)
            assert status.startswith("201"), status

        batch = [{"type": store.NOOP, "args": []}] * BULK

        steps = {"push": push, "bare": lambda: request("GET", "/bench/bare"),
                 "enqueue": lambda: django_ojs.enqueue(store.NOOP, []),
                 "bulk": lambda: django_ojs.enqueue_many(batch)}
        for name, step in steps.items():
            for _ in range(3 if name == "bulk" else 100):
                step()
        print("ready", flush=True)
        for line in sys.stdin:
            name, count = line.split()
            step = steps[name]
            store.reset()
            gc.collect()
            if collection:
                collection.on()
            began, started = time.process_time(), time.perf_counter()
            for _ in range(int(count)):
                step()
            cpu, wall = time.process_time() - began, time.perf_counter() - started
            instructions = 0
            if collection:
                collection.off(name.encode())
                instructions = _collected(os.environ["OJS_BENCH_CALLGRIND_OUT"])
            print(f"{cpu / int(count) * 1e6:.2f} {instructions / int(count):.0f} {wall / int(count) * 1e6:.2f}",
                  flush=True)


def _collected(prefix: str) -> int:
    """The instructions of the newest dump callgrind wrote for this process."""
    newest = max(glob.glob(prefix + ".*"), key=os.path.getmtime)
    with open(newest) as dump:
        for line in dump:
            if line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {newest}")


@contextlib.contextmanager
def checkouts(revisions: list[str], scratch: Path) -> Iterator[list[Path]]:
    """A checkout of each revision (``.``: the working tree itself)."""
    made: list[Path] = []
    try:
        roots = []
        for index, revision in enumerate(revisions):
            if revision == ".":
                roots.append(ROOT)
                continue
            path = scratch / f"rev{index}"
            subprocess.run(["git", "worktree", "add", "-q", "--detach", str(path), revision], cwd=ROOT, check=True)
            made.append(path)
            roots.append(path)
        yield roots
    finally:
        for path in made:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("push", "enqueue", "bulk", "bare"))
    parser.add_argument("revisions", nargs="+", help="git revisions; '.' is the working tree")
    parser.add_argument("--count", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--instructions", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ojs-revisions-") as scratch, \
            checkouts(args.revisions, Path(scratch)) as roots:
        environment = {**os.environ, "OJS_LOG_LEVEL": "WARNING"}
        if args.instructions:
            source = Path(scratch, "collection.c")
            source.write_text(COLLECTION)
            library = Path(scratch, "collection.so")
            subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
            environment["OJS_BENCH_COLLECTION"] = str(library)
        sides = []
        for index, root in enumerate(roots):
            # This file, in the checkout's package: old revisions have none of their own.
            command = [sys.executable, "-c", SERVE.format(path=Path(__file__).resolve())]
            env = {**environment, "PYTHONPATH": str(root)}
            if args.instructions:
                out = Path(scratch, f"callgrind.{index}")
                env["OJS_BENCH_CALLGRIND_OUT"] = str(out)
                command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                           *command]
            sides.append(subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL if args.instructions else None, text=True))
        try:
            for side in sides:
                if side.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
                    raise SystemExit("a side did not start")
            cpu: list[list[float]] = [[] for _ in sides]
            counted: list[list[int]] = [[] for _ in sides]
            walls: list[list[float]] = [[] for _ in sides]
            for round_ in range(args.rounds):
                order = list(range(len(sides)))
                order = order[round_ % len(order):] + order[:round_ % len(order)]
                for index in order[::-1] if round_ % 2 else order:
                    sides[index].stdin.write(f"{args.step} {args.count}\n")  # type: ignore[union-attr]
                    sides[index].stdin.flush()  # type: ignore[union-attr]
                    spent, instructions, wall = sides[index].stdout.readline().split()  # type: ignore[union-attr]
                    cpu[index].append(float(spent))
                    walls[index].append(float(wall))
                    counted[index].append(int(instructions))
        finally:
            for side in sides:
                side.stdin.close()  # type: ignore[union-attr]
                side.wait()
    per = f" of {BULK:,} jobs" if args.step == "bulk" else ""
    print(f"{args.step}: {args.count} steps{per} a round, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    for index, revision in enumerate(args.revisions):
        line = (f"  {revision}: CPU {statistics.median(cpu[index]):.0f} µs "
                f"({statistics.median(cpu[index]) / statistics.median(cpu[0]):.3f}x), "
                f"wall {statistics.median(walls[index]):.0f} µs "
                f"({statistics.median(walls[index]) / statistics.median(walls[0]):.3f}x)")
        if args.instructions:
            line += (f", {statistics.median(counted[index]):,.0f} instructions "
                     f"({statistics.median(counted[index]) / statistics.median(counted[0]):.3f}x)")
        print(line + " each")


if __name__ == "__main__":
    main()
