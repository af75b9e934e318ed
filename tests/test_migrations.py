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
