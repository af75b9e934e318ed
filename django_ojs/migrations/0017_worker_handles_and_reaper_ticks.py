"""The job types an in-process worker has handlers for, on its registration row; and a row
per reaper with its last tick, which the admin overview reads."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0016_failed_jobs_and_job_stories")]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="handles",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="ReaperTick",
            fields=[
                ("id", models.CharField(max_length=255, primary_key=True, serialize=False)),
                ("hostname", models.CharField(blank=True, default="", max_length=255)),
                ("pid", models.PositiveIntegerField(blank=True, null=True)),
                ("started_at", models.DateTimeField()),
                ("last_tick_at", models.DateTimeField()),
            ],
        ),
    ]
