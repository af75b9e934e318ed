"""On PostgreSQL, an INSERT of jobs NOTIFYs ``ojs_available`` once per queue, not once per row.

Migration 0002's trigger ran for each row, inserted or updated: a PL/pgSQL
call and a ``pg_notify`` per job, ~10 ms of a batch of 1,000, though PostgreSQL folds the identical notifications of a
transaction into one at commit anyway. An INSERT now fires one
statement-level trigger that reads the inserted rows (``REFERENCING NEW
TABLE``) and notifies each queue with an available job once.

What the listeners see does not change (``worker/listener.py``): channel
``ojs_available``, payload the queue's name, delivered at commit. UPDATEs
keep 0002's row trigger (``UPDATE OF state``, when the new state is
``available``): retries and scheduled jobs the reaper promotes, requeues,
activations and dead-letter retries still wake workers as before. (A
statement trigger cannot replace it there: PostgreSQL refuses transition
tables on a trigger with a column list, and without ``OF state`` every
UPDATE of a job -- a heartbeat, a progress report -- would run it.)
"""

from django.db import migrations

FORWARD = """
DROP TRIGGER django_ojs_job_available ON django_ojs_job;
CREATE TRIGGER django_ojs_job_available
    AFTER UPDATE OF state ON django_ojs_job
    FOR EACH ROW WHEN (NEW.state = 'available')
    EXECUTE FUNCTION django_ojs_notify_available();

CREATE FUNCTION django_ojs_notify_inserted() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('ojs_available', queue)
        FROM (SELECT DISTINCT queue FROM django_ojs_inserted WHERE state = 'available') AS queues;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER django_ojs_job_inserted
    AFTER INSERT ON django_ojs_job
    REFERENCING NEW TABLE AS django_ojs_inserted
    FOR EACH STATEMENT
    EXECUTE FUNCTION django_ojs_notify_inserted();
"""

BACKWARD = """
DROP TRIGGER django_ojs_job_inserted ON django_ojs_job;
DROP FUNCTION django_ojs_notify_inserted();
DROP TRIGGER django_ojs_job_available ON django_ojs_job;
CREATE TRIGGER django_ojs_job_available
    AFTER INSERT OR UPDATE OF state ON django_ojs_job
    FOR EACH ROW WHEN (NEW.state = 'available')
    EXECUTE FUNCTION django_ojs_notify_available();
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0010_cron_from_code")]
    operations = [migrations.RunPython(forward, backward)]
