"""The hot statements as server-side prepared statements (PostgreSQL, psycopg 3).

Django's psycopg backend binds parameters on the client and sends every
statement as text, so PostgreSQL parses and plans it on every call. The fast
paths -- a single PUSH, FETCH, ACK, and the statements of the worker's turn
-- run the same few statements thousands of times a second; prepared once
per connection, they skip both (a single ``enqueue`` 0.73 → 0.50 ms of
database time, measured side by side; docs/explanation/performance.md).

Only statements whose text is one of a few fixed shapes come here (psycopg
keeps at most 100 per connection, least recently used first out). Their
final select lists name their columns: PostgreSQL refuses to run a prepared
statement whose result row type changed ("cached plan must not change
result type"), and ``SELECT *`` would change with every column a migration
adds while old workers still run.

Off where it cannot work: behind a transaction pooler (PgBouncer before
1.21) a statement prepared on one server connection is missing on the next
one, or another client's statement of the same name runs in its place.
``OJS["PREPARED_STATEMENTS"]``: ``None`` (the default) prepares unless the
database sets ``DISABLE_SERVER_SIDE_CURSORS`` -- the flag Django's
documentation asks for behind such a pooler; ``True``/``False`` decide.
"""

from __future__ import annotations

import functools
import re
import time
import weakref
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from django.db import connection as default_connection
from django.db import connections

from ...conf import ojs_settings


def cursor(connection: Any) -> Any:
    """A cursor of ``connection`` (Django's wrapper) whose ``execute`` prepares; Django's own when off.

    For ``with`` only: the session's cursor is made once and lent to one
    ``with`` at a time (``_Lent``); a ``with`` inside another gets one of its own.
    """
    # ``django.db.connection`` is a proxy that looks the thread's connection up
    # on every attribute read (~5 µs each): read the wrapper once.
    connection = connections[connection.alias]
    if not enabled(connection):
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    session = connection.connection
    if session.prepare_threshold is None:
        # Django turns psycopg's automatic preparing off with None, which
        # also refuses ``prepare=True``; a threshold no statement reaches
        # keeps the automatic one off (Django's own cursors bind on the
        # client and never prepare) and lets ours through.
        session.prepare_threshold = _NEVER_BY_COUNT
    if ojs_settings.PREPARED_STATEMENTS is None and session.autocommit and not session.info.transaction_status:
        planned = _planned_at.get(session)
        if planned is None or time.monotonic() - planned >= REPLAN_SECONDS:
            _plan_once(session, again=planned is not None)
    lent: _Lent | None = getattr(connection, _LENT, None)
    if lent is not None and lent.fits(session, connection):
        connection.validate_thread_sharing()
        return lent
    made = _made_cursor(connection, session)
    if lent is not None and lent.busy:
        return made
    lent = _Lent(session, connection, made)
    setattr(connection, _LENT, lent)
    return lent


def _made_cursor(connection: Any, session: Any) -> Any:
    """A new preparing cursor of ``session``, wrapped by Django as its own cursors are."""
    kind = _kinds()
    assert kind is not None  # enabled() said psycopg 3
    raw = kind.cursor(session)
    raw.logged = connection.queries_logged
    if connection.timezone is not None and session.info.timezone == connection.timezone:
        # Django reads timestamps with a loader of its own that parses in
        # Python and then sets the connection's time zone (~5 µs a value; a
        # claim of 10 jobs reads some 50). Where the session's time zone is
        # that zone (UTC under USE_TZ), psycopg's own loader gives the same
        # datetimes, same tzinfo, in C (~0.3 µs).
        raw.adapters.register_loader(_TIMESTAMPTZ_OID, kind.native_tzloader)
    elif connection.timezone != session.adapters.get_loader(_TIMESTAMPTZ_OID, kind.text).timezone:
        # As Django's create_cursor: the cursor reads timestamps in the
        # connection's time zone if its adapters were made for another one.
        kind.register_tzloader(connection.timezone, raw)
    with connection.wrap_database_errors:
        return connection._prepare_cursor(raw)


class _Lent:
    """A session's preparing cursor, kept on Django's connection and lent to one ``with`` at a time.

    Made per statement, a cursor was 5 % of a single PUSH's instructions and 9 %
    of an ``enqueue``'s (callgrind, tests/bench/revisions.py): psycopg's cursor and
    its copy of the adapters, the time zone's loader registered on it, Django's
    wrapper. Kept for the session it was made on, in the time zone
    and the query logging it was made for; after each ``with`` its results are
    freed, as closing it would.
    """

    def __init__(self, session: Any, connection: Any, wrapper: Any):
        self.session, self.wrapper = session, wrapper
        self.timezone, self.logged = connection.timezone, connection.queries_logged
        self.busy = False

    def fits(self, session: Any, connection: Any) -> bool:
        return (
            not self.busy
            and session is self.session
            and connection.timezone is self.timezone
            and connection.queries_logged == self.logged
            and not self.wrapper.cursor.closed
        )

    def __enter__(self) -> Any:
        self.busy = True
        return self.wrapper

    def __exit__(self, *exc_info: Any) -> None:
        self.busy = False
        # psycopg's own way to drop a cursor's results without closing it (3.1 to 3.3
        # have it). It is not public: a psycopg without it gets the cursor closed, as
        # before, and the next ``with`` a new one (``fits`` sees it closed).
        reset = getattr(self.wrapper.cursor, "_reset", None)
        if reset is None:
            self.wrapper.cursor.close()
        else:
            reset()


def _plan_once(session: Any, *, again: bool = False) -> None:
    """Make PostgreSQL plan each prepared statement of this session once, not on every execution.

    PostgreSQL plans a prepared statement for its parameters' values ("custom
    plans") until a plan for any values ("generic") looks as cheap. A claim's
    ``LIMIT %(count)s`` is costed as a tenth of the backlog in the generic
    plan, so it never looks as cheap: the claim and the worker's turn were
    planned on every call, 0.5 and 1.0 ms of the server's time (a third of
    its CPU per job in a worker run; pg_stat_statements' plans = calls).

    The statements are written so that their generic plans are right
    (tests/core/test_query_plans.py): a state is a literal where a partial
    index must be usable (``state = 'available'``: the claim reads
    ``ojs_job_available``), a parameter where none must be (an ACK finds its
    row by ``id``'s unique index, never by walking an index of states), and
    rows named by an array are joined by their key. The setting is the
    session's, and only this app's statements are prepared on it: Django binds
    its own on the client. Set in autocommit, outside any transaction, so a
    rollback cannot undo it; the first cursor made outside one sets it.

    ``again``: every ``REPLAN_SECONDS`` the session's statements are dropped
    (``DEALLOCATE ALL``, which psycopg sees and forgets its own), to be
    prepared and planned anew. PostgreSQL sizes a table by its pages when it
    plans, so a plan made while the job table was nearly empty reads it
    whole -- a sequential scan where a key lookup is due -- once it is not;
    a plan is never older than that, whatever autovacuum does.

    Only with ``OJS["PREPARED_STATEMENTS"]`` left to decide (``None``): no
    transaction pooler is there (Django's ``DISABLE_SERVER_SIDE_CURSORS`` is
    not set). ``True`` is also the setting for PgBouncer 1.21+ in transaction
    mode, where a session setting would stay on whichever server connection
    ran it, for other clients' statements; there it is left to the operator
    (``ALTER ROLE ... SET plan_cache_mode``, docs/how-to/pgbouncer.md).
    """
    session.execute("DEALLOCATE ALL" if again else "SET plan_cache_mode = force_generic_plan")
    _planned_at[session] = time.monotonic()


def enabled(connection: Any) -> bool:
    """Does ``connection`` prepare the hot statements?"""
    return connection.vendor == "postgresql" and _kinds() is not None and prepares(connection.settings_dict)


def prepares(database: Mapping[str, Any]) -> bool:
    """By the settings alone: does a PostgreSQL database with these ``DATABASES`` settings get them?"""
    setting = ojs_settings.PREPARED_STATEMENTS
    if setting is None:
        return not database.get("DISABLE_SERVER_SIDE_CURSORS", False)
    return bool(setting)


def columns(model: Any, alias: str) -> str:
    """The model's columns as a select list on ``alias``: a result row type no added column changes."""
    return ", ".join(f"{alias}.{column}" for column in _quoted_columns(model))


# How old a session's plans may grow (_plan_once): a minute of plans made for a smaller table, at most.
REPLAN_SECONDS = 60.0
# The psycopg sessions _plan_once has set, and when they last planned; gone with them.
_planned_at: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
_TIMESTAMPTZ_OID = 1184
# The attribute of Django's connection that holds its session's cursor (_Lent).
_LENT = "_ojs_lent_cursor"
_NEVER_BY_COUNT = 2**62
_columns_of: dict[Any, list[str]] = {}
_made: list[_Kinds | None] = []


def _quoted_columns(model: Any) -> list[str]:
    names = _columns_of.get(model)
    if names is None:
        names = _columns_of[model] = [default_connection.ops.quote_name(f.column) for f in model._meta.concrete_fields]
    return names


class _Kinds:
    """What ``cursor`` needs from psycopg 3 and Django's backend, imported once (not per statement)."""

    def __init__(self) -> None:
        import psycopg
        from django.db.backends.postgresql.base import CursorMixin
        from django.db.backends.postgresql.psycopg_any import register_tzloader
        from psycopg.pq import Format

        self.text = Format.TEXT
        # psycopg's default (C where psycopg[binary] or [c] is installed), before Django's override.
        self.native_tzloader = psycopg.adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT)
        self.register_tzloader: Any = register_tzloader
        # psycopg's cursor for queries already in PostgreSQL's own $n form, with Django's mixin.
        base: Any = type("RawServerBindingCursor", (CursorMixin, psycopg.RawCursor), {})

        class PreparingCursor(base):
            """Django's server-binding cursor whose ``execute`` always prepares.

            It takes psycopg's placeholders (``%s``, ``%(name)s``) and hands
            PostgreSQL the statement in its own ``$n`` form, converted once
            per text (``native``): psycopg converts on every execution any
            statement over 4,096 characters, as the worker's turn is (a tenth
            of its loop's time in py-spy).
            """

            # Set by ``cursor()`` when Django logs this connection's queries.
            logged = False

            def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, **kwargs: Any) -> Any:
                text, keys = native(query)
                values = [params[key] for key in keys] if params else params
                try:
                    return super().execute(text, values, prepare=True, **kwargs)
                finally:
                    if self.logged:
                        # Django's debug cursor (DEBUG, connection.queries, tests'
                        # CaptureQueriesContext) logs the text psycopg records for a
                        # client-bound query; a prepared one records none. Log the
                        # statement with its values, runnable as it is.
                        text = psycopg.ClientCursor(self.connection).mogrify(query, params)
                        self._query = SimpleNamespace(query=text.encode())

        self.cursor: Any = PreparingCursor


# A placeholder psycopg knows -- %s, %(name)s -- or an escaped percent sign.
_PLACEHOLDER = re.compile(r"%(?:\((\w+)\))?s|%%")


@functools.lru_cache(maxsize=256)  # the hot statements' few fixed texts
def native(query: str) -> tuple[str, tuple[Any, ...]]:
    """``query`` with PostgreSQL's ``$n`` placeholders, and the key of each ``$n``'s value in the
    caller's parameters: its name for ``%(name)s`` (one ``$n`` however often it is named), its
    position for ``%s``."""
    keys: list[Any] = []
    positions: dict[Any, int] = {}

    def number(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        key = match.group(1) if match.group(1) is not None else sum(isinstance(k, int) for k in keys)
        if key not in positions:
            keys.append(key)
            positions[key] = len(keys)
        return f"${positions[key]}"

    return _PLACEHOLDER.sub(number, query), tuple(keys)


def _kinds() -> _Kinds | None:
    """Made on first use; None under psycopg2 (Django's other driver), which cannot prepare this way."""
    if not _made:
        from django.db.backends.postgresql.psycopg_any import is_psycopg3

        _made.append(_Kinds() if is_psycopg3 else None)
    return _made[0]
