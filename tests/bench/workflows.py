"""What one step's ACK costs in a workflow of N steps, by shape: the advance must not grow with N.

    python -m tests.bench.workflows [--sizes 10,100,1000] [--shapes fanout,chain,layered] [--sqlite]

Each workflow is created through the Python API (``core.workflows.create``)
on a fresh bench database, then driven step by step as a worker would: FETCH
one job, ACK it with a small result (``core.claim.fetch``, ``core.settle.ack``:
the ACK's transaction advances the workflow). Every ACK is timed; the report
per shape and size is the median and p95 ACK, the slowest, the ACK total, and
per ACK on average the statements sent and the workflow node rows read into
Python (figures the machine's load does not move). A run that does not end
with the workflow ``completed`` after one ACK per step is an error.

Shapes (``N`` steps, a DAG in the HTTP binding's ``steps[].depends_on`` form
except the chain):

- ``fanout``: one step, then ``N - 1`` steps that each depend on it only;
- ``chain``: a ``type: chain`` of ``N`` steps (step k sees the k earlier results);
- ``layered``: layers of 10 steps, each step depending on every step of the
  layer before (dense: 10 parents a step, its ``parent_results`` every
  earlier layer's results).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from .stage import DEFAULT_SERVER, bench_database

QUEUE = "bench-wf"
LAYER = 10


def definition(shape: str, size: int) -> dict[str, Any]:
    def job(index: int) -> dict[str, Any]:
        return {"type": "bench.step", "args": [index], "options": {"queue": QUEUE}}

    if shape == "chain":
        return {"type": "chain", "name": f"chain-{size}", "steps": [job(i) for i in range(size)]}
    steps = []
    for index in range(size):
        if shape == "fanout":
            parents = ["s0"] if index else []
        elif shape == "layered":
            layer = index // LAYER
            parents = [f"s{i}" for i in range((layer - 1) * LAYER, layer * LAYER)] if layer else []
        else:
            raise SystemExit(f"unknown shape {shape!r}")
        steps.append({"id": f"s{index}", "depends_on": parents, **job(index)})
    return {"name": f"{shape}-{size}", "steps": steps}


def run(shape: str, size: int) -> dict[str, Any]:
    """Create one workflow and run it to its end; every ACK's seconds, the statements and node rows of all."""
    from django.db import connection
    from django.db.models.signals import post_init

    from django_ojs.core import workflows
    from django_ojs.core.claim import fetch
    from django_ojs.core.settle import ack
    from django_ojs.models import Workflow, WorkflowNode
    from django_ojs.protocol.workflows import parse

    root = parse(definition(shape, size), max_jobs=size, job_options=workflows.job_options())
    workflow = workflows.create(root)
    acks: list[float] = []
    counted = {"statements": 0, "rows": 0}

    def statement(execute, sql, params, many, context):
        counted["statements"] += 1
        return execute(sql, params, many, context)

    def row(**kwargs: Any) -> None:
        counted["rows"] += 1

    while True:
        jobs = fetch([QUEUE], count=1)
        if not jobs:
            break
        [job] = jobs
        post_init.connect(row, sender=WorkflowNode)
        try:
            with connection.execute_wrapper(statement):
                started = time.perf_counter()
                ack(job.id, result={"step": job.args[0], "note": "x" * 40})
                acks.append(time.perf_counter() - started)
        finally:
            post_init.disconnect(row, sender=WorkflowNode)
    state = Workflow.objects.get(id=workflow.id).state
    if len(acks) != size or state != "completed":
        raise SystemExit(f"{shape}-{size}: {len(acks)} ACKs, workflow {state}: not every step ran once")
    return {"acks": acks, **counted}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--shapes", default="fanout,chain,layered")
    parser.add_argument("--sqlite", action="store_true", help="a temporary SQLite file, not PostgreSQL")
    parser.add_argument("--label", default="", help="a word printed on every line (A/B runs)")
    args = parser.parse_args()
    server = os.environ.get("DATABASE_URL", DEFAULT_SERVER)
    with bench_database(server, "sqlite" if args.sqlite else "postgres"):
        print(f"{'':7}{'shape':8} {'N':>5} {'ACK median':>11} {'p95':>9} {'max':>9} {'total':>9} "
              f"{'stmts/ACK':>10} {'rows/ACK':>9}")
        for shape in args.shapes.split(","):
            for size in (int(n) for n in args.sizes.split(",")):
                ran = run(shape, size)
                acks = ran["acks"]
                print(f"{args.label:7}{shape:8} {size:5} {statistics.median(acks) * 1e3:9.1f}ms "
                      f"{p95(acks) * 1e3:7.1f}ms {max(acks) * 1e3:7.1f}ms {sum(acks):8.2f}s "
                      f"{ran['statements'] / size:10.1f} {ran['rows'] / size:9.1f}", flush=True)


if __name__ == "__main__":
    main()
