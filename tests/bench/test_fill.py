"""The suite's fills make the jobs OJS producers make: UUIDv7 ids, in the order they are stored.

The fills clone rows in SQL, so they make their own ids. No OJS job has a
random (v4) id -- ojs-core requires UUIDv7, ``enqueue`` makes them and
PUSH refuses others -- and with random ids every claim and completion puts
the row's new entries in the ``id`` and ``ojs_event_job`` indexes at random
places, which no deployment does. (Interleaved runs at 200,000 jobs waiting
measured no throughput difference on this machine; the ids are for
fidelity, not speed.)
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from django_ojs.models import Job
from tests.helpers import database_url

from . import floor, store

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

JOBS = 500


def assert_time_ordered_v7(ids_in_seq_order: list[uuid.UUID]) -> None:
    assert {job_id.version for job_id in ids_in_seq_order} == {7}
    # The 48-bit millisecond clock leads each id: stored later, never earlier.
    clocks = [job_id.int >> 80 for job_id in ids_in_seq_order]
    assert clocks == sorted(clocks)


def test_our_fill_gives_every_job_a_uuidv7_in_storage_order():
    store.fill(JOBS)

    ids = list(Job.objects.order_by("seq").values_list("id", flat=True))
    assert len(ids) == len(set(ids)) == JOBS
    assert_time_ordered_v7(ids)


def test_the_floor_fill_gives_every_job_a_uuidv7_in_storage_order():
    dsn = database_url()
    floor.install(dsn)
    try:
        floor.fill(dsn, JOBS)
        with psycopg.connect(dsn) as conn:
            ids = [row[0] for row in conn.execute("SELECT id FROM bench_raw_job ORDER BY seq")]
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS bench_raw_job, bench_raw_log")
    assert len(ids) == len(set(ids)) == JOBS
    assert_time_ordered_v7(ids)
