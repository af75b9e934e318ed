"""On PostgreSQL, NOTIFY ``ojs_settled`` once for each statement that may have ended jobs.

Those awaiting a result (``Job.wait()``, ``Job.await_result()``, the HTTP
blocking wait) LISTEN instead of polling (``core/awaiting.py``). Every move
to a terminal state writes ``finished_at``, whichever path makes it (ACK, the
worker's turn, FAIL, cancel, expiry, the reaper, a bounded queue's drop), so a
statement-level trigger on ``UPDATE OF finished_at`` sees them all without
the Python code remembering to notify.

One notification per statement, with an empty payload, not one per job: the
worker's turn that completes 500 jobs costs one trigger call, and PostgreSQL
folds the identical notifications of a transaction into one at commit. A row
trigger naming each job would cost a PL/pgSQL call and a queue entry per job
on the ACK path, and a payload of ids would overflow NOTIFY's 8,000 bytes at
about 200 jobs. The listener asks once, for every job its process awaits,
which of them ended. A statement that wrote ``finished_at`` without ending a
job (a dead-letter retry clears it) costs a needless look, never a wrong answer.
"""

from django.db import migrations

FORWARD = """
CREATE FUNCTION django_ojs_notify_settled() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('ojs_settled', '');
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER django_ojs_job_settled
    AFTER UPDATE OF finished_at ON django_ojs_job
    FOR EACH STATEMENT
    EXECUTE FUNCTION django_ojs_notify_settled();
"""

BACKWARD = """
DROP TRIGGER django_ojs_job_settled ON django_ojs_job;
DROP FUNCTION django_ojs_notify_settled();
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0020_snooze_and_signals")]
    operations = [migrations.RunPython(forward, backward)]
