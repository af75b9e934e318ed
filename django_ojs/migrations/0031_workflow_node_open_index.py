"""An advance asks whether a container has a member not yet ended, without reading them:
``WorkflowNode`` rows of a workflow not yet ended, by path (``core/workflows.py``).

Built with ``CREATE INDEX CONCURRENTLY`` on PostgreSQL (``atomic = False``), so the steps'
ACKs go on while it is built; a plain ``CREATE INDEX`` on SQLite. The release before never
reads it, and its writes keep it true.
"""

from django.db import migrations, models

INDEX = models.Index(
    fields=["workflow", "path"],
    name="ojs_workflow_node_open",
    condition=models.Q(state__in=["waiting", "pending", "running"]),
)


def build(apps, schema_editor):
    model = apps.get_model("django_ojs", "WorkflowNode")
    if schema_editor.connection.vendor == "postgresql":
        sql = str(INDEX.create_sql(model, schema_editor, concurrently=True))
        # An index left invalid by a build stopped halfway is built again.
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{INDEX.name}"')
        schema_editor.execute(sql)
    else:
        schema_editor.add_index(model, INDEX)


def drop(apps, schema_editor):
    model = apps.get_model("django_ojs", "WorkflowNode")
    schema_editor.remove_index(model, INDEX)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("django_ojs", "0030_worker_last_declared_dead_at")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(build, drop)],
            state_operations=[migrations.AddIndex(model_name="workflownode", index=INDEX)],
        )
    ]
