"""manage.py check judges setting values, not only their names."""

from __future__ import annotations

import logging

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_ojs.conf import DEFAULTS
from django_ojs.conf.rules import RULES, problems
from django_ojs.handlers.registry import HandlerRegistry, registry
from django_ojs.observe.logs import show_on_stderr


def ours(**kwargs) -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks() if m.id and m.id.startswith("django_ojs.")]


def test_every_setting_has_a_rule_and_every_default_passes_it():
    assert set(DEFAULTS) <= set(RULES)
    assert problems(DEFAULTS) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HEARTBEAT_INTERVAL", -1), ("HEARTBEAT_INTERVAL", 0), ("HEARTBEAT_INTERVAL", "5"),
        ("WORKER_CONCURRENCY", 0), ("WORKER_CONCURRENCY", 2.5), ("WORKER_CONCURRENCY", True),
        ("AUTH_REQUIRED", "yes"), ("WORKER_QUEUES", "default"), ("WORKER_QUEUES", []),
        ("WORKER_QUEUES", ["Default"]), ("DEFAULT_QUEUE", ""), ("SHUTDOWN_GRACE_PERIOD", -0.5),
        ("DEFAULT_RETRY", {"max_attempts": -3}), ("DEFAULT_RETRY", "3"), ("RETENTION", {"completed": -1}),
        ("RETENTION", {"complete": 60}), ("EXECUTION_MIDDLEWARE", "myapp.Middleware"), ("MAX_BATCH_SIZE", None),
    ],
)
def test_a_value_of_the_wrong_type_or_range_is_an_error(settings, name, value):
    settings.OJS = {name: value}
    [error] = [m for m in ours() if m.id == "django_ojs.E002"]
    assert error.level == checks.ERROR and f"OJS[{name!r}]" in error.msg


def test_two_bad_values_fail_check_with_both_named(settings):
    settings.OJS = {"HEARTBEAT_INTERVAL": -1, "WORKER_CONCURRENCY": 0}
    with pytest.raises(SystemCheckError) as failed:
        call_command("check")
    assert "OJS['HEARTBEAT_INTERVAL'] must be a number of seconds above 0" in str(failed.value)
    assert "OJS['WORKER_CONCURRENCY'] must be a whole number of at least 1" in str(failed.value)


def test_good_values_pass(settings):
    settings.OJS = {"HEARTBEAT_INTERVAL": 2, "HEARTBEAT_TIMEOUT": 10.5, "WORKER_CONCURRENCY": 50,
                    "WORKER_QUEUES": ["email", "default"], "RETENTION": {"completed": 3600},
                    "DEFAULT_RETRY": {"max_attempts": 5}, "PAGE_SIZE": 20}
    assert [m.id for m in ours() if m.level >= checks.ERROR] == []


def test_page_size_may_not_exceed_its_maximum(settings):
    settings.OJS = {"PAGE_SIZE": 500}
    assert any("MAX_PAGE_SIZE" in m.msg for m in ours())


# -- handlers whose queue no worker reads -------------------------------------------


def test_unserved_names_each_handler_whose_default_queue_is_not_read():
    local = HandlerRegistry()
    local.register("email.send", lambda ctx: None, {"queue": "email"})
    local.register("report.build", lambda ctx: None)
    assert local.unserved(["default"], "default") == {"email.send": "email"}
    assert local.unserved(["email"], "default") == {"report.build": "default"}
    assert local.unserved(["email", "default"], "default") == {}


def test_check_warns_about_handlers_the_configured_queues_miss(settings):
    registry.register("trap.email", _handler, {"queue": "email"})
    try:
        [warning] = [m for m in ours() if m.id == "django_ojs.W004"]
        assert "trap.email (queue 'email')" in warning.msg
        settings.OJS = {"WORKER_QUEUES": ["default", "email"]}
        assert "django_ojs.W004" not in [m.id for m in ours()]
    finally:
        registry.unregister("trap.email")


def _handler(ctx):
    return None


# -- logs without LOGGING ---------------------------------------------------------------


@pytest.fixture
def bare_logger():
    logger = logging.getLogger("django_ojs")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    logger.handlers.clear()
    logger.setLevel(logging.NOTSET)
    logger.propagate = False  # stand-in for "no handler anywhere above"
    yield logger
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def test_with_no_handler_anywhere_our_logs_go_to_stderr(bare_logger, capsys):
    bare_logger.handlers.clear()  # pytest's capture handlers, added after the fixture ran
    assert show_on_stderr() is True
    logging.getLogger("django_ojs.worker").info("worker x started")
    assert "INFO django_ojs.worker: worker x started" in capsys.readouterr().err
    assert show_on_stderr() is False  # once


def test_a_projects_logging_is_left_as_it_is(bare_logger):
    mine = logging.NullHandler()
    bare_logger.handlers[:] = [mine]
    bare_logger.setLevel(logging.WARNING)
    assert show_on_stderr() is False
    assert bare_logger.handlers == [mine] and bare_logger.level == logging.WARNING


def test_listen_takes_a_boolean_or_the_alias_of_a_configured_database():
    from django_ojs.conf.rules import RULES

    rule = RULES["LISTEN"]
    assert rule(True) is None and rule(False) is None and rule("default") is None
    assert "names no database" in rule("no-such-alias")
    assert "True, False or a database alias" in rule(1)


# -- prepared statements behind a transaction pooler ------------------------------------


def _postgres(**options):
    return {"ENGINE": "django.db.backends.postgresql", "NAME": "app", **options}


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")  # settings only; no connection is opened
@pytest.mark.parametrize(
    ("ojs", "default", "warned"),
    [
        ({"LISTEN": "direct"}, _postgres(), True),  # the PgBouncer shape (docs/how-to/pgbouncer.md), prepared statements on
        ({"LISTEN": "direct"}, _postgres(DISABLE_SERVER_SIDE_CURSORS=True), False),  # Django's pooler flag
        ({"LISTEN": "direct", "PREPARED_STATEMENTS": False}, _postgres(), False),
        ({"LISTEN": "direct", "PREPARED_STATEMENTS": True}, _postgres(), False),  # decided: a direct connection
        ({"LISTEN": True}, _postgres(), False),
        ({"LISTEN": False}, _postgres(), False),
    ],
)
def test_check_warns_when_listen_is_routed_around_a_pooler_that_prepared_statements_would_cross(
    settings, ojs, default, warned
):
    settings.DATABASES = {"default": default, "direct": _postgres()}
    settings.OJS = ojs
    found = [m for m in ours() if m.id == "django_ojs.W005"]
    assert bool(found) == warned, found
    if warned:
        assert "DISABLE_SERVER_SIDE_CURSORS" in found[0].hint


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
@pytest.mark.parametrize(
    ("ojs", "default", "warned"),
    [
        ({}, _postgres(DISABLE_SERVER_SIDE_CURSORS=True), True),  # LISTEN = True by default, through the pooler
        ({"LISTEN": "direct"}, _postgres(DISABLE_SERVER_SIDE_CURSORS=True), False),  # around it: the docs' way
        ({"LISTEN": False}, _postgres(DISABLE_SERVER_SIDE_CURSORS=True), False),  # polling, said outright
        ({}, _postgres(), False),  # no pooler said
    ],
)
def test_check_warns_that_listen_through_a_transaction_pooler_polls_instead(settings, ojs, default, warned):
    settings.DATABASES = {"default": default, "direct": _postgres()}
    settings.OJS = ojs
    found = [m for m in ours() if m.id == "django_ojs.W007"]
    assert bool(found) == warned, found
    if warned:
        assert "OJS['LISTEN'] = 'direct'" in found[0].hint


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
@pytest.mark.parametrize(
    ("default", "warned"),
    [
        ({"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}, True),  # startproject's own
        ({"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3", "OPTIONS": {"timeout": 30}}, True),
        ({"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3",
          "OPTIONS": {"transaction_mode": "IMMEDIATE"}}, False),
        (_postgres(), False),
    ],
)
def test_check_warns_of_sqlite_whose_writers_would_fail_each_other(settings, default, warned):
    settings.DATABASES = {"default": default}
    found = [m for m in ours() if m.id == "django_ojs.W008"]
    assert bool(found) == warned, found
    if warned:
        assert "'transaction_mode': 'IMMEDIATE'" in found[0].hint


def test_prepared_statements_setting_takes_none_or_a_boolean(settings):
    for value in (None, True, False):
        assert problems({"PREPARED_STATEMENTS": value}) == []
    settings.OJS = {"PREPARED_STATEMENTS": "yes"}
    [error] = [m for m in ours() if m.id == "django_ojs.E002"]
    assert "PREPARED_STATEMENTS" in error.msg


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
@pytest.mark.parametrize(
    ("use_tz", "default", "error"),
    [
        (False, {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}, "django_ojs.E003"),
        (True, {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3", "TIME_ZONE": "America/New_York"},
         "django_ojs.E004"),
        (True, {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3", "TIME_ZONE": "UTC"}, None),
        (True, {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}, None),
        (False, _postgres(), None),  # timestamptz: instants, whatever Django's zone
    ],
)
def test_check_fails_sqlite_whose_clock_and_stored_times_disagree(settings, use_tz, default, error):
    settings.DATABASES = {"default": default}
    settings.USE_TZ = use_tz
    found = [m.id for m in ours() if m.id in ("django_ojs.E003", "django_ojs.E004")]
    assert found == ([error] if error else []), found


def test_check_names_modules_that_define_handlers_nobody_imports(tmp_path, monkeypatch):
    from django.apps import AppConfig

    from django_ojs.conf.checks import check_handlers_never_imported

    app = tmp_path / "misplaced_handlers"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "tasks.py").write_text('import django_ojs\n\n\n@django_ojs.job("billing.charge")\ndef charge(ctx, n):\n    return n\n')
    (app / "views.py").write_text("import django_ojs\n\n\ndef pay(request):\n    django_ojs.enqueue('billing.charge')\n")
    (app / "tests.py").write_text('import django_ojs\n\n\n@django_ojs.job("test.only")\ndef only(ctx):\n    pass\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    config = AppConfig.create("misplaced_handlers")

    [warning] = check_handlers_never_imported(app_configs=[config])
    assert str(app / "tasks.py") in warning.msg
    assert "views.py" not in warning.msg and "tests.py" not in warning.msg
    assert "<app>/jobs.py" in warning.hint

    import misplaced_handlers.tasks  # noqa: F401  (imported, by a jobs.py say: its handlers register)

    assert check_handlers_never_imported(app_configs=[config]) == []
    assert [m for m in ours() if m.id == "django_ojs.W009"] == []  # the test project's own apps
