"""Fair queues: a queue's fairness key, each job's value of it (indexed for the fair claim
only), and when each value was last served."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("django_ojs", "0018_stats_bucket_by_queue")]

    operations = [
        migrations.AddField(
            model_name="queue",
            name="fairness_key",
            field=models.CharField(blank=True, max_length=128, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="fair_key",
            field=models.CharField(blank=True, max_length=255, null=True),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("fair_key__isnull", False), ("state", "available")),
                fields=["queue", "fair_key", "-priority", "seq"],
                name="ojs_job_fair",
            ),
        ),
        migrations.CreateModel(
            name="FairTurn",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("queue", models.CharField(max_length=128)),
                ("fair_key", models.CharField(max_length=255)),
                ("turn", models.BigIntegerField()),
                ("last_claimed_at", models.DateTimeField()),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("queue", "fair_key"), name="ojs_fair_turn_key")],
                "indexes": [models.Index(fields=["queue", "-turn"], name="ojs_fair_turn_last")],
            },
        ),
    ]
