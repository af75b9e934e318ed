"""When the reaper last declared a worker dead, kept when it comes back: ``Worker.last_declared_dead_at``.

A nullable column, so that workers of the release before, which name only the
columns they know, still register during the rollout. Workers dead now get it
from ``declared_dead_at``.
"""

from django.db import migrations, models


def from_current_deaths(apps, schema_editor):
    Worker = apps.get_model("django_ojs", "Worker")
    Worker.objects.filter(declared_dead_at__isnull=False).update(last_declared_dead_at=models.F("declared_dead_at"))


class Migration(migrations.Migration):

    dependencies = [
        ("django_ojs", "0029_cron_schedule_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="last_declared_dead_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(from_current_deaths, migrations.RunPython.noop),
    ]
