"""Snooze and signals: how often a job snoozed, the signals delivered to it, the waits its
handler declared, the wait it is parked on; the signals sent to a workflow."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0019_fair_queues")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="snoozes",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="job",
            name="signals",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="waits",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="waiting_for",
            field=models.CharField(blank=True, max_length=255, null=True),
        ),
        migrations.AddField(
            model_name="workflow",
            name="signals",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
