"""Job ids made in batches (core/job_columns.new_ids): UUIDv7, distinct, on the clock."""

from __future__ import annotations

import time

from django_ojs.core.job_columns import new_ids


def test_new_ids_are_distinct_uuid7_of_this_millisecond():
    before = time.time_ns() // 1_000_000
    ids = new_ids(1000)
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == 1000
    assert {(i.version, i.variant) for i in ids} == {(7, "specified in RFC 4122")}
    assert all(before <= i.int >> 80 <= after for i in ids)
    assert new_ids(0) == []


def test_new_ids_are_uuids_as_parsed_from_their_text():
    """Made without UUID.__init__: they must compare, hash, print and pickle like a parsed one."""
    import pickle
    import uuid

    for made in new_ids(50):
        parsed = uuid.UUID(str(made))
        assert (made, hash(made), made.is_safe) == (parsed, hash(parsed), parsed.is_safe)
        assert pickle.loads(pickle.dumps(made)) == made and {parsed: 1}[made] == 1
