"""System checks: settings that are wrong, or dangerous outside a test bench."""

from __future__ import annotations

import re
import sys
import threading
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from django.apps import apps
from django.core import checks
from django.db import connections

from ..core import coverage
from ..core.awaiting import pooled
from ..core.clock import db_now
from ..core.pg import prepared
from ..handlers.registry import registry
from . import DEFAULTS, ojs_settings

# Off while ``ojs_worker`` runs its system checks: that worker knows the
# queues it reads (--queue) and warns at start about handlers it leaves
# waiting; W004 can only judge OJS["WORKER_QUEUES"], and would contradict it.
judge_worker_queues: ContextVar[bool] = ContextVar("judge_worker_queues", default=True)
# W006 asks the database; past this many seconds (a database down, a host that does not
# answer) ``check`` goes on without it.
STORE_CHECK_SECONDS = 2.0


@checks.register()
def check_settings(app_configs=None, **kwargs):
    messages: list[checks.CheckMessage] = []
    for key in ojs_settings.unknown_keys():
        messages.append(
            checks.Error(
                f"OJS[{key!r}] is not a django-ojs setting.",
                hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                id="django_ojs.E001",
            )
        )
    bad = dict(ojs_settings.problems())
    for key, problem in bad.items():
        messages.append(checks.Error(f"OJS[{key!r}] {problem}.", id="django_ojs.E002"))
    timing_valid = {"HEARTBEAT_TIMEOUT", "HEARTBEAT_INTERVAL"}.isdisjoint(bad)
    if timing_valid and ojs_settings.HEARTBEAT_TIMEOUT < 3 * ojs_settings.HEARTBEAT_INTERVAL:
        messages.append(
            checks.Warning(
                "OJS HEARTBEAT_TIMEOUT is less than 3 heartbeat intervals; busy workers may be declared dead.",
                hint="ojs-worker-protocol §10.3 asks for at least 3x HEARTBEAT_INTERVAL.",
                id="django_ojs.W001",
            )
        )
    if "WORKER_QUEUES" not in bad and "DEFAULT_QUEUE" not in bad and judge_worker_queues.get():
        messages.extend(_unserved_handlers())
    if ojs_settings.TEST_HOOKS:
        messages.append(
            checks.Warning(
                "OJS TEST_HOOKS is on: the test reset endpoint and meta.test_directive are served.",
                hint="Turn it off outside conformance and test runs.",
                id="django_ojs.W002",
            )
        )
    if not ojs_settings.AUTH_REQUIRED:
        messages.append(
            checks.Warning(
                "OJS AUTH_REQUIRED is off: the API accepts requests without an API key.",
                hint="Only on a trusted network, such as the local demo.",
                id="django_ojs.W003",
            )
        )
    if "LISTEN" not in bad and "PREPARED_STATEMENTS" not in bad:
        messages.extend(_prepared_behind_a_pooler())
    if "LISTEN" not in bad:
        messages.extend(_listen_behind_a_pooler())
    messages.extend(_sqlite_writers_not_serialised())
    messages.extend(_sqlite_clock_not_utc())
    return messages


def _sqlite_clock_not_utc() -> list[checks.CheckMessage]:
    """E003, E004: SQLite keeps datetimes as text, which django-ojs compares with the database's UTC clock.

    With ``USE_TZ = False`` Django's SQLite backend refuses the aware datetimes every operation
    writes, so the worker and the reaper fail at start; with a ``TIME_ZONE`` of the database's
    own, it writes local times that the comparisons read as UTC, so scheduled jobs and retries
    come due hours early or late, and leases lapse as far off. (PostgreSQL stores instants and
    Django refuses a database ``TIME_ZONE`` there under ``USE_TZ``.)
    """
    from django.conf import settings

    default: dict[str, Any] = settings.DATABASES.get("default", {})
    if "sqlite3" not in default.get("ENGINE", ""):
        return []
    if not settings.USE_TZ:
        return [
            checks.Error(
                "USE_TZ is False and the default database is SQLite: Django's SQLite backend refuses the "
                "time-zone-aware datetimes django-ojs writes, so enqueue, ojs_worker and ojs_reaper fail with "
                "'SQLite backend does not support timezone-aware datetimes when USE_TZ is False'.",
                hint="Set USE_TZ = True (Django's default since 5.0).",
                id="django_ojs.E003",
            )
        ]
    zone = default.get("TIME_ZONE")
    if zone not in (None, "UTC"):
        return [
            checks.Error(
                f"DATABASES['default']['TIME_ZONE'] is {zone!r} on SQLite: datetimes are stored in that zone but "
                "compared with the database's clock, which is UTC, so scheduled jobs and retries come due early "
                "or late by the zone's offset, and leases lapse as far off.",
                hint="Remove DATABASES['default']['TIME_ZONE'] (or set it to 'UTC'); TIME_ZONE still sets the "
                "zone the admin shows.",
                id="django_ojs.E004",
            )
        ]
    return []


def _sqlite_writers_not_serialised() -> list[checks.CheckMessage]:
    """W008: SQLite without ``transaction_mode: IMMEDIATE``, which DESIGN invariant 10 stands on."""
    from django.conf import settings

    default: dict[str, Any] = settings.DATABASES.get("default", {})
    options: dict[str, Any] = default.get("OPTIONS") or {}
    if "sqlite3" not in default.get("ENGINE", "") or options.get("transaction_mode") == "IMMEDIATE":
        return []
    return [
        checks.Warning(
            "The default database is SQLite without OPTIONS 'transaction_mode': 'IMMEDIATE': a worker and a web "
            "process writing at once fail with 'database is locked' midway through a transaction.",
            hint="DATABASES['default']['OPTIONS'] = {'transaction_mode': 'IMMEDIATE', 'timeout': 30, "
            "'init_command': 'PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;'}: writers then wait their "
            "turn at BEGIN (docs/tutorial.md).",
            id="django_ojs.W008",
        )
    ]


def _listen_behind_a_pooler() -> list[checks.CheckMessage]:
    """W007: ``LISTEN = True`` on a default database that says it goes through a transaction pooler."""
    if ojs_settings.LISTEN is not True or not pooled("default"):
        return []
    return [
        checks.Warning(
            "OJS['LISTEN'] is True, and the default database goes through a transaction pooler "
            "(DISABLE_SERVER_SIDE_CURSORS): a LISTEN there would stay on a pooled server connection, so "
            "workers and waiters poll it instead, every POLL_INTERVAL.",
            hint="Name an alias that reaches PostgreSQL directly (OJS['LISTEN'] = 'direct') for pickups within "
            "milliseconds, in the workers and the web processes alike, or set OJS['LISTEN'] = False to say "
            "polling is meant (docs/how-to/pgbouncer.md).",
            id="django_ojs.W007",
        )
    ]


def _prepared_behind_a_pooler() -> list[checks.CheckMessage]:
    """LISTEN on an alias of its own is the way around a transaction pooler (docs/how-to/pgbouncer.md), where prepared statements break."""
    from django.conf import settings

    listen = ojs_settings.LISTEN
    if not isinstance(listen, str) or ojs_settings.PREPARED_STATEMENTS is not None:
        return []  # no alias, or the project decided

    default = settings.DATABASES.get("default", {})
    if "postgresql" not in default.get("ENGINE", "") or not prepared.prepares(default):
        return []
    return [
        checks.Warning(
            f"OJS['LISTEN'] names the database {listen!r}, as when the default one goes through a transaction "
            "pooler, but django-ojs prepares its hot statements on the default database.",
            hint="Behind PgBouncer in transaction mode (before 1.21) set DISABLE_SERVER_SIDE_CURSORS = True in "
            "DATABASES['default'] (or OJS['PREPARED_STATEMENTS'] = False); if the default database reaches "
            "PostgreSQL directly, set OJS['PREPARED_STATEMENTS'] = True to say so.",
            id="django_ojs.W005",
        )
    ]


def _unserved_handlers() -> list[checks.CheckMessage]:
    unserved = registry.unserved(ojs_settings.WORKER_QUEUES, ojs_settings.DEFAULT_QUEUE)
    if not unserved:
        return []
    listed = ", ".join(f"{job_type} (queue {queue!r})" for job_type, queue in unserved.items())
    return [
        checks.Warning(
            f"These handlers' jobs go to queues OJS['WORKER_QUEUES'] does not read: {listed}. "
            "A worker started without --queue leaves them waiting.",
            hint=f"Add the queues to OJS['WORKER_QUEUES'] (now {list(ojs_settings.WORKER_QUEUES)!r}), or start "
            "workers with --queue for them and silence this check (SILENCED_SYSTEM_CHECKS = ['django_ojs.W004']).",
            id="django_ojs.W004",
        )
    ]


# A handler's decorator at the start of a line: ``@django_ojs.job(...)``, or ``@job(...)`` imported from it.
HANDLER_DECORATOR = re.compile(r"^[ \t]*@(?:django_ojs\.)?job\b", re.MULTILINE)


@checks.register()
def check_handlers_never_imported(app_configs=None, **kwargs):
    """W009: a module of an installed app defines handlers, but nothing imports it.

    django-ojs imports ``<app>/jobs.py`` only (``apps.py``). Handlers written in ``tasks.py`` or
    ``handlers.py`` and imported by no one register nowhere: the worker starts with none of them
    and their jobs wait, ``available``, with nothing said. By the time checks run every module
    the project imports at start is loaded, so one not in ``sys.modules`` is one no worker loads.
    Reads the top-level modules of the project's apps (not those under site-packages), not tests.
    """
    found: list[str] = []
    for config in app_configs or apps.get_app_configs():
        if config.name == "django_ojs" or config.name.startswith("django.") or "-packages" in config.path:
            continue
        for source in sorted(Path(config.path).glob("*.py")):
            module = f"{config.name}.{source.stem}"
            if source.stem.startswith(("test", "conftest")) or module in sys.modules:
                continue
            try:
                text = source.read_text(errors="replace")
            except OSError:
                continue
            if "django_ojs" in text and HANDLER_DECORATOR.search(text):
                found.append(str(source))
    if not found:
        return []
    return [
        checks.Warning(
            f"These modules define handlers (@django_ojs.job) but nothing imports them, so no worker has those "
            f"handlers and their jobs wait unclaimed: {', '.join(found)}.",
            hint="django-ojs imports the jobs module of every installed app (<app>/jobs.py): move the handlers "
            "there, or import their module from it.",
            id="django_ojs.W009",
        )
    ]


@checks.register()
def check_unrunnable_jobs(app_configs=None, **kwargs):
    """W006: jobs wait that no running worker has a handler for (``core/coverage.py``).

    Asked of the database only when it answers: in a thread of its own, given
    ``STORE_CHECK_SECONDS``, so ``manage.py check`` (and ``migrate``, which runs
    the checks first) is neither failed nor held up by a database that is down,
    unreachable or not migrated yet -- the check then says nothing.
    """
    found: list[str] = []

    def ask() -> None:
        try:
            items, _complete = coverage.unrunnable()
            found.extend(coverage.describe(items, db_now()))
        except Exception:  # down, not migrated, or no database allowed here (a test): nothing to say
            pass
        finally:
            connections.close_all()  # this thread's connections only

    thread = threading.Thread(target=ask, name="django_ojs.W006", daemon=True)
    thread.start()
    thread.join(STORE_CHECK_SECONDS)
    if thread.is_alive() or not found:
        return []
    return [
        checks.Warning(
            f"Jobs wait that no running worker can run: {'; '.join(found)}.",
            hint="A worker claims only the job types it has handlers for, so these wait (available, never lost) "
            "for one that has them: deploy the handler to a worker that reads the queue, or fix the type "
            "the code enqueues. manage.py ojs queues names them too.",
            id="django_ojs.W006",
        )
    ]
