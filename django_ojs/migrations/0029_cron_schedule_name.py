"""The admin names ``CronJob`` a "cron schedule", as its page and the docs do: a name only, no change to a table."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("django_ojs", "0028_worker_overrun_handlers"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="cronjob",
            options={"verbose_name": "cron schedule"},
        ),
    ]
