"""OJS["LISTEN"]: which connection an idle worker LISTENs on (worker/listener.py).

A named alias, for real behind PgBouncer: tests/worker/test_pgbouncer.py.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from django_ojs.core.awaiting import listen_alias


def test_true_listens_on_the_default_database_where_it_is_postgresql(ojs):
    ojs(LISTEN=True)
    assert listen_alias() == ("default" if connection.vendor == "postgresql" else None)


def test_false_turns_listening_off(ojs):
    ojs(LISTEN=False)
    assert listen_alias() is None


def test_an_alias_databases_does_not_define_is_a_configuration_error(ojs):
    ojs(LISTEN="direct")
    with pytest.raises(ImproperlyConfigured, match="'direct'"):
        listen_alias()

