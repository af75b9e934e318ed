"""Section ``worker``: ``manage.py ojs_worker`` end to end, every job verified run exactly once.

Each run starts from ``--jobs`` noop jobs already available, starts 1 or 2
real worker processes at concurrency 10 or 50, waits until nothing is
available or active, and stops them with SIGTERM (each must exit 0).
jobs/s is read from the store: the first claim (``started_at``) to the last
completion (``completed_at``), both stamped by PostgreSQL, so start-up does
not count. Exactly once: every job completed on attempt 1 with one
``job.started`` and one ``job.completed`` event.

Floor: the raw-SQL queue of floor.py, 2 processes claiming 10 per statement.
Peer: pgqueuer, 5 consumer processes, batch 10. Both are read from their
own tables' timestamps and checked for exactly once the same way.

With ``--observability`` each shape also runs with the Prometheus metrics
on, with metrics and tracing on (every span recorded by an OTel SDK
pipeline that exports nowhere, tests/bench/settings.py), and with metrics
and tracing sampled at 10 % (``ParentBased(TraceIdRatioBased(0.1))``), in
the same round as its run with both off, the order rotating from round to
round (off, metrics, tracing, sampled; metrics, tracing, sampled, off; ...):
the load of a shared machine drifts, and it must drift over all alike. Their figures
(``worker.1x10.metrics``, ``worker.1x10.tracing``) have the run off as
their floor: the ratio is the throughput kept, the target ≥ 0.95.
"""

from __future__ import annotations

import os

from django_ojs.models import Worker

from . import floor, peer, store
from .plan import Run
from .report import Figure, Target, median, median_or_none
from .stage import BenchError, Process, started, wait_for

SHAPES = ((1, 10), (2, 10), (1, 50), (2, 50))
# The share of traces the "sampled" mode records, as a production project samples.
SAMPLED_SHARE = 0.1
# The workers' environment per mode (example_project/settings.py reads OJS_METRICS
# and OJS_TRACING; PROMETHEUS_MULTIPROC_DIR is the suite's, for every process).
MODES = {
    "off": {"OJS_METRICS": "false", "OJS_TRACING": "false", "OJS_BENCH_OTEL_SDK": ""},
    "metrics": {"OJS_METRICS": "true", "OJS_TRACING": "false", "OJS_BENCH_OTEL_SDK": ""},
    "tracing": {"OJS_METRICS": "true", "OJS_TRACING": "true", "OJS_BENCH_OTEL_SDK": "1"},
    "sampled": {"OJS_METRICS": "true", "OJS_TRACING": "true", "OJS_BENCH_OTEL_SDK": str(SAMPLED_SHARE)},
}
MODE_NAMES = {"metrics": "metrics on", "tracing": "metrics + tracing on",
              "sampled": f"metrics + tracing on, {SAMPLED_SHARE:.0%} of traces sampled"}
KEPT = 0.95  # the throughput observability must keep (≤ 5 % cost, docs/explanation/performance.md)
FLOOR_PROCESSES = 2
PEER_CONSUMERS, PEER_BATCH = 5, 10
SPIN = "demo.spin"  # example_project.demo: uses the CPU it is told to (--job-cpu-ms)


def _deadline(jobs: int) -> float:
    """Seconds a run may take: far beyond any plausible figure, so a stuck run fails instead of hanging."""
    return 120 + jobs / 50


def _cpu_seconds(pid: int) -> float | None:
    """A process's user + system CPU so far (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# /proc counts CPU in clock ticks (10 ms): below this much, a per-job figure would be mostly rounding.
MIN_CPU_SECONDS = 0.2


def _per_job(into: list[float], seconds: float, jobs: int) -> None:
    """Append ``seconds`` of CPU over ``jobs`` as µs per job, when enough was used to tell."""
    if seconds >= MIN_CPU_SECONDS:
        into.append(seconds / jobs * 1e6)


def _server_cpu_seconds() -> float | None:
    """Every ``postgres`` process's user + system CPU so far: the backends, and the WAL writer,
    checkpointer and autovacuum that work for them. None where none is visible (a server on
    another host, or no /proc). On a machine whose server others use too, their work counts."""
    total, seen = 0.0, False
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if comm.read().strip() != "postgres":
                    continue
        except OSError:
            continue
        used = _cpu_seconds(int(pid))
        if used is not None:
            total, seen = total + used, True
    return total if seen else None


def ours(context: Run, processes: int, concurrency: int, mode: str = "off", cpu: list | None = None,
         server_cpu: list | None = None) -> float:
    """jobs/s; ``cpu`` gets the workers' CPU per job in µs once under way, where /proc tells, and
    ``server_cpu`` PostgreSQL's over the same jobs (``_server_cpu_seconds``)."""
    jobs = context.sizes.jobs
    store.reset()
    work = {"job_type": SPIN, "args": [context.job_cpu_ms]} if context.job_cpu_ms else {}
    # Sampled: jobs enqueued without a sampled producer span, so the ratio sampler decides for each.
    store.fill(jobs, roots=mode == "sampled", **work)
    env = MODES[mode] if context.observability else {}
    workers = [Process.manage(context.stage, "ojs_worker", "--concurrency", str(concurrency), **env)
               for _ in range(processes)]
    with started(workers):
        # Each worker must have registered before it may be stopped: with few jobs one worker
        # can work them all while the other is still importing Django, where SIGTERM kills it
        # (-15). Registered, its signal handlers are in place.
        pids = {worker.pid for worker in workers}
        wait_for(lambda: set(Worker.objects.filter(pid__in=pids).values_list("pid", flat=True)) == pids,
                 _deadline(0), "every worker to register", workers, interval=0.05)
        # The workers' CPU is read once they are under way (a job completed) and at the end, so
        # the CPU per job is their running cost: start-up (imports, checks, registering) is
        # not, and the metrics and tracing libraries take longer to import than to use.
        wait_for(store.completed, _deadline(jobs), "a first job to be worked", workers, interval=0.02)
        server_begun = _server_cpu_seconds()
        begun, done_then = [_cpu_seconds(worker.pid) for worker in workers], store.completed()
        wait_for(lambda: not store.busy(), _deadline(jobs), f"{jobs:,} jobs to be worked", workers, interval=0.2)
        used = [_cpu_seconds(worker.pid) for worker in workers]
        server_used = _server_cpu_seconds()
        if cpu is not None and None not in used + begun and done_then < jobs:
            _per_job(cpu, sum(used) - sum(begun), jobs - done_then)  # type: ignore[arg-type]
        if server_cpu is not None and server_begun is not None and server_used is not None and done_then < jobs:
            _per_job(server_cpu, server_used - server_begun, jobs - done_then)
        for worker in workers:
            if (status := worker.stop()) != 0:
                raise BenchError(f"ojs_worker exited {status} after SIGTERM:\n{worker.output()[-2000:]}")
    store.verify_exactly_once(jobs)
    return store.throughput()[0]


def raw(context: Run) -> float:
    jobs = context.sizes.jobs
    floor.install(context.dsn)
    floor.fill(context.dsn, jobs)
    _run_until_exit([Process.module(context.stage, "tests.bench.floor", "work", context.dsn)
                     for _ in range(FLOOR_PROCESSES)], jobs)
    return floor.measure(context.dsn, jobs)


def theirs(context: Run) -> float:
    jobs = context.sizes.jobs
    peer.reset(context.dsn)
    peer.enqueue_bulk(context.dsn, jobs)
    _run_until_exit([Process.module(context.stage, "tests.bench.peer", "consume", context.dsn,
                                    "--batch", str(PEER_BATCH)) for _ in range(PEER_CONSUMERS)], jobs)
    return peer.measure(context.dsn, jobs)


def _run_until_exit(processes: list[Process], jobs: int) -> None:
    """They stop by themselves once the queue is empty; each must exit 0."""
    with started(processes):
        for process in processes:
            if (status := process.wait(_deadline(jobs))) != 0:
                raise BenchError(f"{' '.join(process.argv[-4:])} exited {status}:\n{process.output()[-2000:]}")


def run(context: Run) -> list[Figure]:
    modes = list(MODES) if context.observability else ["off"]
    rates: dict[tuple[int, int, str], list[float]] = {(*shape, mode): [] for shape in SHAPES for mode in modes}
    cpus: dict[tuple[int, int, str], list[float]] = {(*shape, mode): [] for shape in SHAPES for mode in modes}
    server_cpus: dict[tuple[int, int], list[float]] = {shape: [] for shape in SHAPES}
    floors: list[float] = []
    peers: list[float] = []
    for round_ in range(context.sizes.repeat):
        for shape in SHAPES:
            for mode in modes[round_ % len(modes):] + modes[:round_ % len(modes)]:
                rates[(*shape, mode)].append(ours(context, *shape, mode, cpus[(*shape, mode)],
                                                  server_cpus[shape] if mode == "off" else None))
        if context.job_cpu_ms:
            continue  # the floor's and the peer's jobs do nothing: no counterpart to jobs with work
        floors.append(raw(context))
        if context.peer:
            peers.append(theirs(context))
    work = f", jobs of {context.job_cpu_ms:g} ms CPU" if context.job_cpu_ms else ""
    figures = []
    for processes, concurrency in SHAPES:
        samples = rates[(processes, concurrency, "off")]
        noop = not context.job_cpu_ms
        targets = ((Target("peer", ">=", 1.2), Target("floor", ">=", 0.6))
                   if (processes, concurrency) == (2, 10) and noop else ())
        figures.append(Figure(
            f"worker.{processes}x{concurrency}", f"ojs_worker {processes} × concurrency {concurrency}{work}",
            "jobs/s", median(samples), floor=median_or_none(floors),
            floor_name=f"raw SQL: {FLOOR_PROCESSES} processes, claim 10 per UPDATE … SKIP LOCKED" if floors else "",
            peer=median_or_none(peers), peer_note=context.peer_note if noop else "no counterpart (jobs with work)",
            targets=targets, samples=samples, floor_samples=floors, peer_samples=peers,
            detail={"jobs": context.sizes.jobs, "job_cpu_ms": context.job_cpu_ms,
                    "peer": f"pgqueuer {PEER_CONSUMERS} consumers × batch {PEER_BATCH}",
                    # What a job costs each side, for sizing (docs/how-to/deployment.md#sizing).
                    **cpu_detail(cpus[(processes, concurrency, "off")], server_cpus[(processes, concurrency)])},
        ))
    for mode in modes[1:]:
        figures += [observed(processes, concurrency, mode, rates[(processes, concurrency, mode)],
                             rates[(processes, concurrency, "off")], cpus[(processes, concurrency, mode)],
                             cpus[(processes, concurrency, "off")], work) for processes, concurrency in SHAPES]
    return figures


def cpu_detail(workers_cpu: list[float], server_cpu: list[float]) -> dict[str, float]:
    """The medians of the workers' and of PostgreSQL's CPU per job (µs), each where it was read."""
    return {**({"worker_cpu_us_per_job": round(median(workers_cpu))} if workers_cpu else {}),
            **({"postgres_cpu_us_per_job": round(median(server_cpu))} if server_cpu else {})}


def observed(processes: int, concurrency: int, mode: str, samples: list[float], off: list[float],
             cpu: list[float], cpu_off: list[float], work: str = "") -> Figure:
    """A shape with observability on, against the same shape off in the same rounds.

    Beside throughput, the workers' CPU per job (once under way): on a
    shared machine it moves far less than jobs/s, and what observability
    costs a worker is CPU.
    """
    return Figure(
        f"worker.{processes}x{concurrency}.{mode}",
        f"ojs_worker {processes} × concurrency {concurrency}{work}, {MODE_NAMES[mode]}", "jobs/s",
        median(samples), floor=median(off), floor_name="the same shape, metrics and tracing off, interleaved",
        peer_note="no counterpart", targets=(Target("floor", ">=", KEPT),), samples=samples, floor_samples=off,
        # Round by round (each on-run beside the off-run of its round): steadier than medians apart.
        detail={"paired_ratio_median": median([on / base for on, base in zip(samples, off)]),
                **({"cpu_us_per_job": median(cpu), "cpu_us_per_job_off": median(cpu_off),
                    "cpu_ratio_off": median(cpu) / median(cpu_off)} if cpu and cpu_off else {}),
                # Each round's CPU beside its own off-run's, when every run of both read /proc.
                **({"cpu_paired_ratio_median": median([on / base for on, base in zip(cpu, cpu_off)])}
                   if cpu and len(cpu) == len(cpu_off) == len(samples) else {})},
    )
