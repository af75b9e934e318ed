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
