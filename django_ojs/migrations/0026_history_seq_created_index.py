"""A creation time range over history walks a day that holds many of its jobs in seq order,
testing each job's creation time in an index of ``(seq, created_at)`` (``core/partitions.py``,
``HISTORY_INDEXES``) instead of reading each row: built online as migration 0025 builds its
indexes (``build_history_indexes``, hence ``atomic = False``), on the terminal partitions only.
"""

from django.db import migrations

STEM = "ojs_job_seq_created"


def build(apps, schema_editor):
    from django_ojs.core import partitions

    partitions.build_history_indexes(schema_editor.connection)  # none on SQLite or one plain table


def drop(apps, schema_editor):
    from django_ojs.core import partitions

    partitions.drop_history_indexes(schema_editor.connection, [STEM])


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("django_ojs", "0025_history_list_indexes")]

    operations = [migrations.RunPython(build, drop)]
