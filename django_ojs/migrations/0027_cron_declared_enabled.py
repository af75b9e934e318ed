"""What the code last declared for a schedule's ``enabled``: ``CronJob.declared_enabled``.

Null on every existing row: the first reaper start after this migration applies the
code's ``enabled`` once, as every start did before; from then on an operator's enable or
disable of a code schedule stands until the code's own ``enabled`` changes.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("django_ojs", "0026_history_seq_created_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="cronjob",
            name="declared_enabled",
            field=models.BooleanField(blank=True, null=True),
        ),
    ]
