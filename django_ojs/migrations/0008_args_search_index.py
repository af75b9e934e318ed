"""Job search inside ``args`` (docs/how-to/admin.md, "Search"): a GIN index on PostgreSQL.

``ojs_job_args`` (GIN, ``jsonb_path_ops``) serves ``args @> '[...]'``, the
containment query every ``args`` search term becomes (``django_ojs/search.py``).
``jsonb_path_ops`` indexes only containment, at about half the size and
write cost of the default operator class. Jobs without arguments are left
out (the query says ``args <> '[]'`` so the planner can use the partial
index). SQLite has no GIN: a development database searches by scanning.
"""

from django.db import migrations

CREATE_ARGS_INDEX = (
    "CREATE INDEX IF NOT EXISTS ojs_job_args ON django_ojs_job USING gin (args jsonb_path_ops) "
    "WHERE args <> '[]'::jsonb"
)
DROP_ARGS_INDEX = "DROP INDEX IF EXISTS ojs_job_args"


def create_args_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE_ARGS_INDEX)


def drop_args_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_ARGS_INDEX)


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0007_workflows")]

    operations = [migrations.RunPython(create_args_index, drop_args_index, elidable=False)]
