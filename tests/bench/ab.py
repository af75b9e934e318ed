"""A/B in one run: a function of the code as committed at a git revision against the working tree's.

    python -m tests.bench.ab bulk|single|worker|events|layout|history_indexes|seq_created_index|store_indexes [--rev HEAD] [--rounds 6] [--size 10]

The old module is loaded from ``git show <rev>:<path>`` beside the new one, and
the measured call is pointed at one or the other, alternating round by round on
one fresh bench database (the machine's drift falls on both alike); the report
is each side's median jobs/s and the ratio of medians new/old.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .stage import DEFAULT_SERVER, ROOT, bench_database


def old_module(name: str, rev: str) -> types.ModuleType:
    """The module ``name`` as it was at ``rev``, loaded under its own package (relative imports work)."""
    path = name.replace(".", "/") + ".py"
    source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    module = types.ModuleType(name + "_at_" + rev.replace("~", "_"))
    module.__package__ = name.rpartition(".")[0]
    module.__file__ = f"{rev}:{path}"
    sys.modules[module.__name__] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


@contextmanager
def swapped(owner: object, attribute: str, value: object) -> Iterator[None]:
    before = getattr(owner, attribute)
    setattr(owner, attribute, value)
    try:
        yield
    finally:
        setattr(owner, attribute, before)


def _enqueue_case(rev: str, jobs: int, enqueue: Callable[[], None], per_call: int) -> tuple[Callable[[], float], Callable[[], float]]:
    """``enqueue`` (``per_call`` jobs a call) until ``jobs`` are stored, through the one-statement PUSH
    module at ``rev`` (old) and in the working tree (new); jobs/s, and the enqueuing CPU per job."""
    from django_ojs.core.pg import engine

    from . import store

    new = importlib.import_module("django_ojs.core.pg.push")
    old = old_module("django_ojs.core.pg.push", rev)

    def run(module: types.ModuleType) -> float:
        store.reset()
        with swapped(engine, "push", module):
            began, cpu = time.perf_counter(), time.process_time()
            for _ in range(jobs // per_call):
                enqueue()
            CPU_US.append((time.process_time() - cpu) / jobs * 1e6)
            return jobs / (time.perf_counter() - began)

    return (lambda: run(old)), (lambda: run(new))


def bulk_case(rev: str, batches: int) -> tuple[Callable[[], float], Callable[[], float]]:
    import django_ojs

    from . import store

    return _enqueue_case(rev, 1000 * batches,
                         lambda: django_ojs.enqueue_many([{"type": store.NOOP, "args": []} for _ in range(1000)]), 1000)


def single_case(rev: str, count: int) -> tuple[Callable[[], float], Callable[[], float]]:
    import django_ojs

    from . import store

    return _enqueue_case(rev, count, lambda: django_ojs.enqueue(store.NOOP, []), 1)


def worker_case(rev: str, jobs: int) -> tuple[Callable[[], float], Callable[[], float]]:
    """2 ``ojs_worker`` × concurrency 10 on ``jobs`` noop jobs, as the suite's worker section runs them.

    Old: the processes run a checkout of ``rev`` (``OJS_BENCH_BASELINE_ROOT``, e.g. ``git worktree
    add --detach ../baseline <rev>``): the whole worker, not one module, is the old one.
    """
    from . import stage, workers
    from .plan import Run, Sizes

    baseline = os.environ.get("OJS_BENCH_BASELINE_ROOT")
    if not baseline:
        raise SystemExit("worker: set OJS_BENCH_BASELINE_ROOT to a checkout of the old code")
    context = Run(stage=CURRENT_STAGE[0], sizes=Sizes(jobs=jobs), peer=False, peer_note="")

    def run(root: Path) -> float:
        with swapped(stage, "ROOT", root):
            return workers.ours(context, 2, 10)

    return (lambda: run(Path(baseline))), (lambda: run(stage.ROOT))


def events_case(rev: str, jobs: int) -> tuple[Callable[[], float], Callable[[], float]]:
    """The working tree's 2 × 10 workers with the event store on (old) and off (new): what events cost.

    With it off no run can be checked for its events, only for every job completed once.
    """
    from . import store, workers
    from .plan import Run, Sizes

    context = Run(stage=CURRENT_STAGE[0], sizes=Sizes(jobs=jobs), peer=False, peer_note="", observability=True)
    modes = {**workers.MODES, "events_off": {**workers.MODES["off"], "OJS_BENCH_EVENTS_OFF": "1"}}

    def counted_once(expected: int) -> None:
        once = Job.objects.filter(state="completed", attempt=1).count()
        if once != expected:
            raise SystemExit(f"{once} of {expected} jobs completed on attempt 1")

    from django_ojs.models import Job

    def run(mode: str) -> float:
        with swapped(workers, "MODES", modes), swapped(store, "verify_exactly_once", counted_once):
            return workers.ours(context, 2, 10, mode)

    return (lambda: run("off")), (lambda: run("events_off"))


def layout_case(rev: str, jobs: int) -> tuple[Callable[[], float], Callable[[], float]]:
    """The working tree's 2 × 10 workers on the job table as one plain table (old) and partitioned
    by state (new, core/partitions.py): the database migrated back before 0024 and forward again,
    on one database, before each run (an empty table: the migration partitions it in place)."""
    from django.core.management import call_command

    from django_ojs.core import partitions

    from . import workers
    from .plan import Run, Sizes

    context = Run(stage=CURRENT_STAGE[0], sizes=Sizes(jobs=jobs), peer=False, peer_note="")

    def run(partitioned: bool) -> float:
        call_command("migrate", "django_ojs", "0024" if partitioned else "0023", verbosity=0)
        if partitions.is_partitioned() != partitioned:
            raise SystemExit(f"the job table is not {'partitioned' if partitioned else 'plain'}")
        return workers.ours(context, 2, 10)

    return (lambda: run(False)), (lambda: run(True))


def history_indexes_case(rev: str, jobs: int) -> tuple[Callable[[], float], Callable[[], float]]:
    """The working tree's 2 × 10 workers on the partitioned table without the admin lists' history
    indexes (old: migrations 0025 and on reversed) and with them (new): what a finish pays for them."""
    return _indexes_case(jobs, "0024", _history_index_names())


def seq_created_index_case(rev: str, jobs: int) -> tuple[Callable[[], float], Callable[[], float]]:
    """As ``history_indexes``, without (old: migration 0026 reversed) and with the one index of
    ``(seq, created_at)``: what a finish pays for it alone."""
    return _indexes_case(jobs, "0025", _history_index_names("ojs_job_seq_created"))


def _history_index_names(*stems: str) -> list[str]:
    from django_ojs.core import partitions

    return [f"{stem}_{state}" for stem, (_, states) in partitions.HISTORY_INDEXES.items()
            if not stems or stem in stems for state in states]


def _indexes_case(jobs: int, back_to: str, names: list[str]) -> tuple[Callable[[], float], Callable[[], float]]:
    """2 × 10 workers with the migrations after ``back_to`` reversed (old) and applied (new);
    ``names``: the indexes that are there only in the new."""
    from django.core.management import call_command
    from django.db import connection

    from . import workers
    from .plan import Run, Sizes

    context = Run(stage=CURRENT_STAGE[0], sizes=Sizes(jobs=jobs), peer=False, peer_note="")

    def run(indexed: bool) -> float:
        call_command("migrate", "django_ojs", *([] if indexed else [back_to]), verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_class WHERE relname = ANY(%s)", [names])
            if cursor.fetchone()[0] != (len(names) if indexed else 0):
                raise SystemExit(f"the indexes are not {'there' if indexed else 'gone'}")
        return workers.ours(context, 2, 10)

    return (lambda: run(False)), (lambda: run(True))


# The job indexes a worker's run reads: the claim's walk of available jobs, a job by seq or id, a
# worker's held jobs. ``store_indexes`` drops every other job index (all partitions).
RUN_INDEXES = ("ojs_job_available", "ojs_job_owner", "django_ojs_job_pkey", "django_ojs_job_id_key")


def store_indexes_case(rev: str, jobs: int) -> tuple[Callable[[], float], Callable[[], float]]:
    """The working tree's 2 × 10 workers without (old) and with (new) the job table's indexes that
    serve anything but the run itself (``RUN_INDEXES``): the admin's and the API's lists and
    searches, unique keys, fairness, limits, schedules, expiry, the reaper's scans. What every
    claim and finish pays for them; not a configuration anyone should run."""
    from django.db import connection

    from django_ojs.models import Job

    from . import workers
    from .plan import Run, Sizes

    context = Run(stage=CURRENT_STAGE[0], sizes=Sizes(jobs=jobs), peer=False, peer_note="")
    with connection.cursor() as cursor:
        # The partitions' own indexes, not their children: dropping or making a state's index does each day's.
        cursor.execute(
            "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " WHERE i.indrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)"
            " AND NOT i.indisunique"
            " AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = i.indexrelid)",
            [Job._meta.db_table],
        )
        made = {name: sql for name, sql in cursor.fetchall() if not name.startswith(RUN_INDEXES)}
    if not made:
        raise SystemExit("store_indexes: the job table is not partitioned (migrate first)")

    def run(indexed: bool) -> float:
        with connection.cursor() as cursor:
            for name, sql in made.items():
                cursor.execute(f"DROP INDEX IF EXISTS {name}")
                if indexed:
                    cursor.execute(sql)
        return workers.ours(context, 2, 10)

    return (lambda: run(False)), (lambda: run(True))


CASES = {"bulk": bulk_case, "single": single_case, "worker": worker_case, "events": events_case,
         "layout": layout_case, "history_indexes": history_indexes_case, "seq_created_index": seq_created_index_case,
         "store_indexes": store_indexes_case}
CURRENT_STAGE: list = []
# The enqueuing process's CPU per job (µs) of the last run, where the case measures it.
CPU_US: list[float] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--size", type=int, default=10, help="batches of 1,000 (bulk) or jobs / 100 (single)")
    args = parser.parse_args()
    with bench_database(os.environ.get("DATABASE_URL", DEFAULT_SERVER)) as stage:
        CURRENT_STAGE.append(stage)
        size = {"bulk": args.size, "single": args.size * 100}.get(args.case, args.size * 1000)
        old, new = CASES[args.case](args.rev, size)
        old(), new()  # warm both
        rates: dict[str, list[float]] = {"old": [], "new": []}
        cpus: dict[str, list[float]] = {"old": [], "new": []}
        for round_ in range(args.rounds):
            for side, measure in (("old", old), ("new", new)) if round_ % 2 == 0 else (("new", new), ("old", old)):
                CPU_US.clear()
                rates[side].append(measure())
                cpus[side] += CPU_US
        old_rate, new_rate = statistics.median(rates["old"]), statistics.median(rates["new"])
        print(f"{args.case}: old ({args.rev}) {old_rate:,.0f} jobs/s, new {new_rate:,.0f} jobs/s, "
              f"new/old {new_rate / old_rate:.2f}  (load {os.getloadavg()[0]:.1f}; "
              f"old {[round(r) for r in rates['old']]}, new {[round(r) for r in rates['new']]})")
        if cpus["old"] and cpus["new"]:
            old_cpu, new_cpu = statistics.median(cpus["old"]), statistics.median(cpus["new"])
            print(f"  client CPU per job: old {old_cpu:.0f} µs, new {new_cpu:.0f} µs, new/old {new_cpu / old_cpu:.2f}")


if __name__ == "__main__":
    main()
