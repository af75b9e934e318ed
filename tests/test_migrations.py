"""The models and the migrations agree, on every supported Django version."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_missing_migrations():
    out = StringIO()
    try:
        call_command("makemigrations", "django_ojs", "--check", "--dry-run", stdout=out)
    except SystemExit as exc:
        pytest.fail(f"models changed without a migration:\n{out.getvalue()}")
        raise exc


@pytest.mark.django_db
def test_rows_written_by_the_release_before_a_new_column_are_stored():
    """During a rolling deploy processes of the release before insert rows naming only the
    columns they knew: every column added since has a default in the database too."""
    from django.db import connection
    from django.utils import timezone

    from django_ojs.models import FairTurn, Queue

    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {Queue._meta.db_table} (name, paused, created_at, overflow_policy) "
                       "VALUES (%s, %s, %s, %s)", ["from-before", False, now, "reject"])
        cursor.execute(f"INSERT INTO {FairTurn._meta.db_table} (queue, fair_key, turn, last_claimed_at) "
                       "VALUES (%s, %s, %s, %s)", ["from-before", "acme", 1, now])
    queue = Queue.objects.get(name="from-before")
    assert (queue.fairness_weights, queue.fairness_default_weight) == ({}, 1)
    assert FairTurn.objects.get(queue="from-before").used == 0


@pytest.mark.django_db(transaction=True)
def test_events_of_both_layouts_read_alike_and_going_back_before_0033_keeps_every_payload_and_id(push):
    """A job's event keeps its job's fields in columns and no id (0033); the release before wrote
    the whole payload as JSON with a random id, and still does during a rolling deploy."""
    import json
    import uuid

    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    from django_ojs.models import Event

    job = push(type="layout.new", options={"queue": "layouts"})
    new = Event.objects.get(job_id=job.id)
    old_id = uuid.uuid4()

    def as_stored(field, value):
        return Event._meta.get_field(field).get_db_prep_value(value, connection)

    with connection.cursor() as cursor:  # as the release before inserts it
        cursor.execute(f"INSERT INTO {Event._meta.db_table} (id, type, time, job_id, queue, data) "
                       "VALUES (%s, 'job.started', %s, %s, 'layouts', %s)",
                       [as_stored("stored_id", old_id), timezone.now(), as_stored("job_id", job.id),
                        json.dumps({"job_id": str(job.id), "job_type": "layout.new", "queue": "layouts",
                                    "state": "active", "attempt": 1, "worker_id": "w-old"})])
    old = Event.objects.get(job_id=job.id, type="job.started")
    assert old.id == old_id and old.data["worker_id"] == "w-old" and old.data["job_type"] == "layout.new"
    expected = {event.seq: (event.id, event.data) for event in (new, old)}

    call_command("migrate", "django_ojs", "0032", verbosity=0)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT seq, id, data FROM {Event._meta.db_table} ORDER BY seq")
            back = {seq: (uuid.UUID(str(id_)), data if isinstance(data, dict) else json.loads(data))
                    for seq, id_, data in cursor.fetchall()}
        assert back == expected
    finally:
        call_command("migrate", "django_ojs", verbosity=0)
    assert not MigrationExecutor(connection).migration_plan(MigrationExecutor(connection).loader.graph.leaf_nodes())
    assert {event.seq: (event.id, event.data) for event in Event.objects.all()} == expected
