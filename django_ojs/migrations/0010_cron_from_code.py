"""Cron schedules declared in code: ``CronJob.from_code``."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("django_ojs", "0009_progress_and_event_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="cronjob",
            name="from_code",
            field=models.BooleanField(default=False),
        ),
    ]
