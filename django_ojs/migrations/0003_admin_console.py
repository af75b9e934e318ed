"""The operators' console: two proxy entries and the indexes its searches need.

``ojs_job_type`` (type, seq) serves the type filter and search newest first,
and gives the filter its choices by a loose index scan instead of a
``SELECT DISTINCT`` over the whole table. On PostgreSQL, ``ojs_job_meta``
(GIN, ``jsonb_path_ops``) serves the search by meta values (tenant id,
correlation id) with ``meta @> {...}``; jobs without meta are left out of
it. SQLite has no GIN: a development database searches meta by scanning.
"""

from django.db import migrations, models

CREATE_META_INDEX = (
    "CREATE INDEX IF NOT EXISTS ojs_job_meta ON django_ojs_job USING gin (meta jsonb_path_ops) "
    "WHERE meta <> '{}'::jsonb"
)
DROP_META_INDEX = "DROP INDEX IF EXISTS ojs_job_meta"


def create_meta_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE_META_INDEX)


def drop_meta_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_META_INDEX)


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0002_notify_available")]

    operations = [
        migrations.CreateModel(
            name="DeadLetterJob",
            fields=[],
            options={"verbose_name": "dead letter job", "proxy": True, "indexes": [], "constraints": []},
            bases=("django_ojs.job",),
        ),
        migrations.CreateModel(
            name="Overview",
            fields=[],
            options={
                "verbose_name": "overview",
                "verbose_name_plural": "overview",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("django_ojs.job",),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["type", "seq"], name="ojs_job_type"),
        ),
        migrations.RunPython(create_meta_index, drop_meta_index),
    ]
