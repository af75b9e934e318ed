"""The admin's job lists over history -- by priority, by schedule, in a creation time range, the
dead letter -- read an index of each day partition.

``core/partitions.py`` (``HISTORY_INDEXES``) describes them: on the terminal partitions only,
built online (``build_history_indexes``: an index ON ONLY each state's partition, one per day
partition built CONCURRENTLY and attached), so no lock is held longer than a catalog change,
however big the history: finishes wait a moment at most, claims not at all. Hence
``atomic = False`` (CONCURRENTLY cannot run in a transaction).

A table partitioned by migration 0024 in this same run has them already (the tree is made
with them). One plain table on PostgreSQL (too big for 0024, waiting for ``manage.py
ojs_partition migrate``) and SQLite get none: there they would also index the waiting jobs,
which every PUSH and claim would pay for; the partitioned tree gets them when it is built.
"""

from django.db import migrations


def build(apps, schema_editor):
    from django_ojs.core import partitions

    partitions.build_history_indexes(schema_editor.connection)  # none on SQLite or one plain table


def drop(apps, schema_editor):
    from django_ojs.core import partitions

    partitions.drop_history_indexes(schema_editor.connection, partitions.HISTORY_INDEXES)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("django_ojs", "0024_partitioned_job_history")]

    operations = [migrations.RunPython(build, drop)]
