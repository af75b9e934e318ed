"""The run tests the engine it says it tests: a misconfigured run must not pass on the wrong engine."""

from __future__ import annotations

import os

import pytest
from django.db import connection

from django_ojs.core import engine


@pytest.mark.django_db
def test_the_engine_under_test_is_the_one_this_run_asked_for():
    asked_stepwise = os.environ.get("OJS_TEST_ENGINE") == "stepwise"
    expected = "postgres" if connection.vendor == "postgresql" and not asked_stepwise else "stepwise"
    assert engine.current().name == expected


@pytest.mark.django_db
def test_turning_the_engine_off_takes_every_operation_stepwise(ojs):
    ojs(ONE_STATEMENT_PATHS=False)
    assert engine.current() is engine.STEPWISE
