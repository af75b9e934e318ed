"""A job's event keeps its job's fields in columns and stores no id (``Event.id`` is made from its seq).

Every step is a change of the catalog alone on PostgreSQL, whatever the
events table holds: three nullable columns added, the unique index of ``id``
dropped and its NOT NULL lifted, and ``data`` (the field ``extra`` now)
made nullable. Events written before keep their payload and their id; new
ones write only what the columns do not say (docs/how-to/upgrading.md).
"""

from django.db import migrations, models

# Events rewritten per batch when going back.
BATCH = 1000


def payload_back_into_json(apps, schema_editor):
    """Going back: each event of the new layout gets its whole payload in ``data`` and its id stored.

    The release before reads only those, and its ``id`` is NOT NULL and
    unique: this runs before the columns are dropped and ``id`` constrained.
    """
    Event = apps.get_model("django_ojs", "Event")
    db = schema_editor.connection.alias
    last = 0
    while True:
        batch = list(
            Event.objects.using(db).filter(seq__gt=last)
            .filter(models.Q(stored_id__isnull=True) | models.Q(job_type__isnull=False))
            .order_by("seq")[:BATCH]
        )
        if not batch:
            return
        for event in batch:
            if event.job_type is not None:
                event.extra = {"job_id": str(event.job_id), "job_type": event.job_type, "queue": event.queue,
                               "state": event.state, "attempt": event.attempt, **(event.extra or {})}
            event.extra = event.extra or {}
            if event.stored_id is None:
                event.stored_id = _made_id(event.time, event.seq)
        Event.objects.using(db).bulk_update(batch, ["extra", "stored_id"])
        last = batch[-1].seq


def _made_id(time, seq):
    """``Event.id`` (the historical model has no properties)."""
    import uuid

    millis = int(time.timestamp() * 1000) & 0xFFFF_FFFF_FFFF
    counter = seq & ((1 << 74) - 1)
    return uuid.UUID(int=millis << 80 | 0x7 << 76 | (counter >> 62) << 64 | 0b10 << 62 | (counter & ((1 << 62) - 1)))


class Migration(migrations.Migration):

    dependencies = [
        ("django_ojs", "0032_apikey_expires_at"),
    ]

    operations = [
        # The fields are renamed, their columns are not: no statement.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RenameField(model_name="event", old_name="data", new_name="extra"),
                migrations.AlterField(
                    model_name="event", name="extra", field=models.JSONField(default=dict, db_column="data")
                ),
                migrations.RenameField(model_name="event", old_name="id", new_name="stored_id"),
                migrations.AlterField(
                    model_name="event", name="stored_id",
                    field=models.UUIDField(editable=False, unique=True, db_column="id"),
                ),
            ],
        ),
        migrations.AlterField(
            model_name="event", name="extra", field=models.JSONField(blank=True, null=True, db_column="data")
        ),
        migrations.AlterField(
            model_name="event", name="stored_id",
            field=models.UUIDField(blank=True, editable=False, null=True, db_column="id"),
        ),
        migrations.AddField(
            model_name="event", name="job_type", field=models.CharField(blank=True, max_length=255, null=True)
        ),
        migrations.AddField(
            model_name="event", name="state", field=models.CharField(blank=True, max_length=16, null=True)
        ),
        migrations.AddField(model_name="event", name="attempt", field=models.IntegerField(blank=True, null=True)),
        migrations.RunPython(migrations.RunPython.noop, payload_back_into_json),
    ]
