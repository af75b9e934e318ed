"""Weighted fair queues: a queue's weights per value of its fairness key, and how many claims
each value has taken in its current round."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0022_durable_checkpoints_and_steps")]

    operations = [
        migrations.AddField(
            model_name="queue",
            name="fairness_weights",
            field=models.JSONField(blank=True, default=dict, help_text='{"acme": 3, "small": 1}'),
        ),
        migrations.AddField(
            model_name="queue",
            name="fairness_default_weight",
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="fairturn",
            name="used",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
