"""Handlers still running though their job ended: ``Worker.overrun_handlers``.

A column with a database default, so that workers of the release before, which name
only the columns they know, still register during the rollout.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("django_ojs", "0027_cron_declared_enabled"),
    ]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="overrun_handlers",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
    ]
