"""Job ids made in batches (core/newjob.new_ids): UUIDv7, distinct, on the clock."""

from __future__ import annotations

import time

from django_ojs.core.newjob import new_ids


def test_new_ids_are_distinct_uuid7_of_this_millisecond():
    before = time.time_ns() // 1_000_000
    ids = new_ids(1000)
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == 1000
    assert {(i.version, i.variant) for i in ids} == {(7, "specified in RFC 4122")}
    assert all(before <= i.int >> 80 <= after for i in ids)
    assert new_ids(0) == []
