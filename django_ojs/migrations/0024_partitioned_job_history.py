"""On PostgreSQL, the job table becomes a tree of partitions: live jobs apart, finished ones by day.

``core/partitions.py`` describes the layout, docs/how-to/history-partitions.md the procedure.
The error history and the durable steps lose their foreign key constraint first (a
partitioned table has no unique constraint on ``seq`` to reference); Django still deletes them
with their job, and the core's deletes delete them explicitly.

A table of at most ``INLINE_LIMIT`` jobs is partitioned here, inside the migration. A bigger
one is left as it is, for ``manage.py ojs_partition migrate`` (online, in batches): the code
works on both layouts. SQLite keeps one table.
"""

import logging

from django.db import migrations, models

logger = logging.getLogger("django_ojs.migrations")

INLINE_LIMIT = 100_000


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from django_ojs.core import partition_migration, partitions

    if partitions.is_partitioned(schema_editor.connection):
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {partitions.TABLE} LIMIT {INLINE_LIMIT + 1}) AS sample"
        )
        jobs = cursor.fetchone()[0]
    if jobs > INLINE_LIMIT:
        message = (
            f"django_ojs: the job table holds over {INLINE_LIMIT:,} jobs and was left unpartitioned; "
            "run `manage.py ojs_partition migrate` (online) to partition it: see "
            "docs/how-to/history-partitions.md"
        )
        if logger.hasHandlers():
            logger.warning(message)  # where the project's logging sends it (a console, a file)
        else:
            print("\n  " + message)  # no logging configured: on the console that runs migrate, once
        return
    partition_migration.partition_in_place(apps.get_model("django_ojs", "Job"))


def lock_the_job_table_first(apps, schema_editor):
    """Take the job table's lock before the error history's and the steps': dropping their foreign
    key locks the table altered, then the job table, while a worker failing a job holds the job
    row and then writes its error -- the other order, a deadlock that kills the worker's write or
    this migration halfway (tests/core/pg/test_migration_lock_order.py). The foreign keys' drop
    and the partitioning below take this lock anyway: writers wait no longer for it."""
    if schema_editor.connection.vendor != "postgresql":
        return
    from django_ojs.core import partitions

    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {partitions.TABLE} IN ACCESS EXCLUSIVE MODE")


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from django_ojs.core import partition_migration

    partition_migration.unpartition(apps.get_model("django_ojs", "Job"), schema_editor)


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0023_fair_weights")]

    operations = [
        migrations.RunPython(lock_the_job_table_first, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="joberror",
            name="job",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=models.deletion.CASCADE,
                related_name="errors",
                to="django_ojs.job",
            ),
        ),
        migrations.AlterField(
            model_name="jobstep",
            name="job",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=models.deletion.CASCADE,
                related_name="steps",
                to="django_ojs.job",
            ),
        ),
        migrations.RunPython(partition, unpartition),
    ]
