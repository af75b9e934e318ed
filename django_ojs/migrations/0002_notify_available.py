"""On PostgreSQL, NOTIFY ``ojs_available`` with the queue name whenever a job becomes available.

Idle workers LISTEN instead of polling. A trigger catches every path to
``available`` (PUSH, promotion, requeue, activation, dead-letter retry)
without the Python code remembering to notify; PostgreSQL delivers at
commit and folds identical notifications of one transaction into one.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION django_ojs_notify_available() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('ojs_available', NEW.queue);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER django_ojs_job_available
    AFTER INSERT OR UPDATE OF state ON django_ojs_job
    FOR EACH ROW WHEN (NEW.state = 'available')
    EXECUTE FUNCTION django_ojs_notify_available();
"""

DROP = """
DROP TRIGGER IF EXISTS django_ojs_job_available ON django_ojs_job;
DROP FUNCTION IF EXISTS django_ojs_notify_available();
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
