"""Section ``enqueue``: storing jobs from Python, in bulk and one by one.

- bulk: ``django_ojs.enqueue_many`` in batches of 1,000; floor: raw ``COPY``
  in batches of 1,000; peer: pgqueuer's ``enqueue`` with lists of 1,000.
- single: ``django_ojs.enqueue`` per job, each its own transaction; floor:
  one autocommit ``INSERT`` per job; peer: pgqueuer's ``enqueue`` per job.
- single in a transaction: the same, each inside a ``transaction.atomic()``
  of its own, as a view that enqueues a job with its own writes; floor:
  BEGIN, ``INSERT``, COMMIT; peer: pgqueuer's ``enqueue`` in a transaction.

jobs/s by the wall clock of the enqueuing process; each system starts from
an empty table.
"""

from __future__ import annotations

import contextlib
import functools
import time

from django.db import transaction

import django_ojs

from . import floor, peer, store
from .plan import Run
from .report import Figure, Target, median, median_or_none

BATCH = 1000
KINDS = ("bulk", "single", "single_tx")


def ours_bulk(count: int) -> float:
    began = time.perf_counter()
    for offset in range(0, count, BATCH):
        django_ojs.enqueue_many([{"type": store.NOOP, "args": []} for _ in range(min(BATCH, count - offset))])
    return time.perf_counter() - began


def ours_single(count: int, in_transaction: bool = False) -> float:
    began = time.perf_counter()
    for _ in range(count):
        with transaction.atomic() if in_transaction else contextlib.nullcontext():
            django_ojs.enqueue(store.NOOP, [])
    return time.perf_counter() - began


def run(context: Run) -> list[Figure]:
    bulk, single = context.sizes.jobs, context.sizes.single
    rates: dict[str, list[float]] = {name: [] for name in
                                     (f"{kind}{of}" for kind in KINDS for of in ("", "_floor", "_peer"))}
    in_transaction = {"in_transaction": True}
    for _ in range(context.sizes.repeat):
        for kind, count, ours, raw, theirs in (
            ("bulk", bulk, ours_bulk, floor.enqueue_bulk, peer.enqueue_bulk),
            ("single", single, ours_single, floor.enqueue_single, peer.enqueue_single),
            ("single_tx", single, functools.partial(ours_single, **in_transaction),
             functools.partial(floor.enqueue_single, **in_transaction),
             functools.partial(peer.enqueue_single, **in_transaction)),
        ):
            store.reset()
            rates[kind].append(count / ours(count))
            floor.install(context.dsn)
            rates[f"{kind}_floor"].append(count / raw(context.dsn, count))
            if context.peer:
                peer.reset(context.dsn)
                rates[f"{kind}_peer"].append(count / theirs(context.dsn, count))
    return [
        Figure(
            "enqueue.bulk", f"bulk enqueue, Python (enqueue_many × {BATCH:,})", "jobs/s", median(rates["bulk"]),
            floor=median(rates["bulk_floor"]), floor_name=f"raw SQL: COPY, {BATCH:,} per transaction",
            peer=median_or_none(rates["bulk_peer"]), peer_note=context.peer_note,
            targets=(Target("peer", ">=", 1.0),), samples=rates["bulk"], floor_samples=rates["bulk_floor"],
            peer_samples=rates["bulk_peer"], detail={"jobs": bulk},
        ),
        Figure(
            "enqueue.single", "single enqueue, Python (enqueue, own transaction)", "jobs/s",
            median(rates["single"]),
            floor=median(rates["single_floor"]), floor_name="raw SQL: one INSERT per job, autocommit",
            peer=median_or_none(rates["single_peer"]), peer_note=context.peer_note,
            targets=(Target("peer", ">=", 1.0),), samples=rates["single"], floor_samples=rates["single_floor"],
            peer_samples=rates["single_peer"], detail={"jobs": single},
        ),
        Figure(
            "enqueue.single_tx", "single enqueue in the caller's transaction, Python (atomic + enqueue)", "jobs/s",
            median(rates["single_tx"]),
            floor=median(rates["single_tx_floor"]), floor_name="raw SQL: BEGIN, one INSERT, COMMIT per job",
            peer=median_or_none(rates["single_tx_peer"]), peer_note=context.peer_note,
            samples=rates["single_tx"], floor_samples=rates["single_tx_floor"],
            peer_samples=rates["single_tx_peer"], detail={"jobs": single},
        ),
    ]
