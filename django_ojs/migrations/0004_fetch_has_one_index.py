"""Leave available jobs out of (queue, state): FETCH must have one index to choose.

With statistics older than a queue's backlog, PostgreSQL estimated one
matching row, chose (queue, state) over ojs_job_available, and sorted the
whole backlog on every claim: 42 ms per FETCH at 100,000 queued jobs
instead of 0.1 ms.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_ojs', '0003_admin_console'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='job',
            name='ojs_job_queue_state',
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('state', 'available'), _negated=True), fields=['queue', 'state'], name='ojs_job_queue_state'),
        ),
    ]
