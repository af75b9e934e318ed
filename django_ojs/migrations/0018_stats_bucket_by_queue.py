"""An index of one queue's statistics history: a read for one queue takes its own buckets.

The history table is small (a row per queue, transition and minute for two
days, per hour for 35), so the index builds in a moment.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("django_ojs", "0017_worker_handles_and_reaper_ticks"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="statsbucket",
            index=models.Index(fields=["span", "queue", "start"], name="ojs_stats_bucket_queue"),
        ),
    ]
