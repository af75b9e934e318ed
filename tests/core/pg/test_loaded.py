"""Jobs read back by the fast paths (core/loaded.raw_loaded) are the ORM's jobs, value for value."""

from __future__ import annotations

import pytest
from django.db import connection

from django_ojs.core.pg import rows as loaded
from django_ojs.models import Job

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("text", ["{}", "[]", '{"a": [1, 2.5, "é", null]}', "[{}]", "3", '"s"', "true", "null"])
def test_a_json_column_reads_as_the_fields_decoder_reads_it(text):
    field = Job._meta.get_field("meta")
    assert loaded._json_column(text, None, connection) == field.from_db_value(text, None, connection)


def test_empty_containers_are_fresh_objects_each_time():
    first, second = loaded._json_column("{}", None, connection), loaded._json_column("{}", None, connection)
    first["changed"] = True
    assert second == {} and loaded._json_column("[]", None, connection) is not loaded._json_column(
        "[]", None, connection)


def test_raw_loaded_rows_equal_the_orms(push):
    job = push(args=[1, {"k": []}], meta={"m": {}}, options={"tags": ["t"], "queue": "loaded"})
    columns = ", ".join(connection.ops.quote_name(f.column) for f in Job._meta.concrete_fields)
    [raw] = loaded.raw_loaded(Job.objects, f"SELECT {columns} FROM django_ojs_job WHERE seq = %s", [job.seq])
    orm = Job.objects.get(seq=job.seq)
    for field in Job._meta.concrete_fields:
        assert getattr(raw, field.attname) == getattr(orm, field.attname), field.attname
        assert type(getattr(raw, field.attname)) is type(getattr(orm, field.attname)), field.attname
