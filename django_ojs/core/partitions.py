"""Job history in time partitions on PostgreSQL: the layout, its upkeep, and retention by DROP.

One Django model and one logical table (``django_ojs_job``): every query of
the core stays as it is, and only the physical layout changes on PostgreSQL
(docs/how-to/history-partitions.md)::

    django_ojs_job                      PARTITION BY LIST (state)
      django_ojs_job_live               the non-terminal states: claims, ACK, BEAT, the reaper
      django_ojs_job_completed          PARTITION BY RANGE (finished_at)
        django_ojs_job_completed_YYYYMMDD   one per day (UTC)
        django_ojs_job_completed_default    a day whose partition is missing: a finish never fails
      django_ojs_job_cancelled  (same shape)
      django_ojs_job_discarded  (same shape)

A move to a terminal state is an UPDATE of ``state`` that PostgreSQL turns into
row movement; a query that names a live state is pruned to the live partition
at plan time, so the hot path never meets history. Retention drops whole day
partitions (``maintain``) instead of deleting rows; rows in a DEFAULT partition,
plain discards and the dead letter's cap keep the DELETE of ``maintenance.prune``.

SQLite, and a PostgreSQL table not yet migrated (``manage.py ojs_partition
migrate``, ``core/partition_migration.py``), keep one table: ``is_partitioned``
says which layout a database has, and every caller works on both.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import OperationalError, ProgrammingError, connection, connections, transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.models import QuerySet
from django.db.models.sql.datastructures import BaseTable

from ..conf import ojs_settings
from ..models import Event, Job, JobError, JobStep
from ..protocol.states import TERMINAL, JobState

logger = logging.getLogger("django_ojs.reaper")

TABLE = "django_ojs_job"
LIVE = f"{TABLE}_live"
TERMINAL_STATES = tuple(sorted(state.value for state in TERMINAL))
LIVE_STATES = tuple(sorted(state.value for state in JobState if state not in TERMINAL))
# A condition that keeps a statement on the live partition at plan time, prepared or not, and
# (on either layout) proves no partial index usable: none is on exactly these states. A hot
# statement by id or seq adds it beside its own state test, which stays a parameter for that reason.
LIVE_SQL = "(" + ", ".join(f"'{state}'" for state in LIVE_STATES) + ")"
# Day partitions made ahead of time: today and the next ones, so a finish lands in its own day
# even while the reaper is away for a while (the DEFAULT partition catches the rest).
DAYS_AHEAD = 2
# Model indexes that serve history only: not on the live partition.
HISTORY_ONLY = frozenset({"ojs_job_finished", "ojs_job_dead_letter"})
# Model indexes kept on the terminal partitions (besides seq, id and the GIN searches).
ON_HISTORY = {
    "ojs_job_finished": TERMINAL_STATES,
    "ojs_job_dead_letter": (JobState.DISCARDED.value,),
    "ojs_job_queue_state": TERMINAL_STATES,
    "ojs_job_type": TERMINAL_STATES,
}
# The admin's searches (migrations 0003, 0008), on every partition.
SEARCH_INDEXES = {
    "ojs_job_meta": "CREATE INDEX {name} ON {table} USING gin (meta jsonb_path_ops)",
    "ojs_job_args": "CREATE INDEX {name} ON {table} USING gin (args jsonb_path_ops)",
}
# The admin's lists over history (api/admin/paging.py), on terminal partitions only, each with
# the states whose partitions carry it. A page of a list is a merge of every partition's rows in
# the list's order, and the merge reads a first row from each partition before it returns one:
# each index lets a partition give its rows in that order, or find at once that it holds none.
# (priority, seq), read backward, gives priority DESC, seq DESC too; (scheduled_at, seq) of the jobs
# that have one gives both orders by schedule (those without follow by seq: paging.Keyset.parts),
# and costs only the jobs that were scheduled; (created_at) finds the few rows of a creation time
# range in a day that is not its own; (seq, created_at) walks a day that holds many of them in seq
# order testing each creation time in the index, reading a row only when it is in the range (the
# day of the range's end holds its newest jobs after the range: walked along (seq), each was read);
# (seq) of the dead letter skips the
# plain discards, which a partition of discarded jobs holds by the thousand and the dead letter's
# list would walk through. The live partition keeps none: every index there costs each PUSH and
# claim, and its rows are few enough for a bounded sort.
HISTORY_INDEXES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ojs_job_priority": ("CREATE INDEX {name} ON {table} (priority, seq)", TERMINAL_STATES),
    "ojs_job_created": ("CREATE INDEX {name} ON {table} (created_at)", TERMINAL_STATES),
    "ojs_job_seq_created": ("CREATE INDEX {name} ON {table} (seq, created_at)", TERMINAL_STATES),
    "ojs_job_scheduled": (
        "CREATE INDEX {name} ON {table} (scheduled_at, seq) WHERE scheduled_at IS NOT NULL", TERMINAL_STATES
    ),
    "ojs_job_dead_letter_seq": ("CREATE INDEX {name} ON {table} (seq) WHERE dead_letter", (JobState.DISCARDED.value,)),
}
# The prune's reads and DELETEs wait at most this long for a lock (an operator's VACUUM FULL of a
# day partition), then give up until the next pass. Their locks are the traffic's own kinds: nobody
# queues behind them while they wait.
LOCK_TIMEOUT = "2s"
# DDL is another matter. A DROP or an ATTACH takes ACCESS EXCLUSIVE on a state's partition and its
# DEFAULT leaf; while it waits for a long query (a report, pg_dump), every finish into that state
# and every lookup by id waits behind it. So it waits no longer than a turn or an admin page takes,
# and gives up until the next pass: a long query costs the traffic a moment a pass, not seconds.
DDL_LOCK_TIMEOUT = "200ms"
# PostgreSQL's "lock_not_available": a lock not had within the lock timeout.
LOCK_NOT_AVAILABLE = "55P03"
QUERY_CANCELED = "57014"
# The advisory lock that keeps partition upkeep to one reaper at a time ("OJSP").
UPKEEP_LOCK = 0x4F4A5350
# PostgreSQL's "undefined_table": a partition dropped between reading the list and reading it.
UNDEFINED_TABLE = "42P01"
# Rows of a dropped partition whose errors, steps and events go per statement.
FORGET_BATCH = 5_000

# NOTIFY triggers (migrations 0002, 0011, 0021), recreated on the partitioned parent.
NOTIFY_TRIGGERS = """
CREATE TRIGGER django_ojs_job_available
    AFTER UPDATE OF state ON {table}
    FOR EACH ROW WHEN (NEW.state = 'available')
    EXECUTE FUNCTION django_ojs_notify_available();
CREATE TRIGGER django_ojs_job_inserted
    AFTER INSERT ON {table}
    REFERENCING NEW TABLE AS django_ojs_inserted
    FOR EACH STATEMENT
    EXECUTE FUNCTION django_ojs_notify_inserted();
CREATE TRIGGER django_ojs_job_settled
    AFTER UPDATE OF finished_at ON {table}
    FOR EACH STATEMENT
    EXECUTE FUNCTION django_ojs_notify_settled();
"""
# A job that comes back to the live partition from history (a dead-letter retry) is moved by an
# UPDATE that PostgreSQL turns into a DELETE and an INSERT, firing no AFTER UPDATE row trigger:
# the live partition's own INSERT trigger wakes the workers. A job PUSHed anew (enqueued as it
# is created) does not satisfy its WHEN, which costs no function call.
RETURNED_TRIGGER = """
CREATE TRIGGER django_ojs_job_returned
    AFTER INSERT ON {table}
    FOR EACH ROW WHEN (NEW.state = 'available' AND NEW.enqueued_at > NEW.created_at)
    EXECUTE FUNCTION django_ojs_notify_available();
"""
DROP_NOTIFY_TRIGGERS = """
DROP TRIGGER IF EXISTS django_ojs_job_available ON {table};
DROP TRIGGER IF EXISTS django_ojs_job_inserted ON {table};
DROP TRIGGER IF EXISTS django_ojs_job_settled ON {table};
"""


def is_partitioned(using: Any = None) -> bool:
    """Is the job table partitioned (PostgreSQL, migrated)? False on SQLite and for one plain table."""
    conn = using or connection
    if conn.vendor != "postgresql":
        return False
    with conn.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


# The days one partition of discarded jobs holds at the least. Every discarded job goes by the
# DELETE prune at its own retention (plain discards after days, dead letters at their "kept
# until" or past the dead letter's cap, which bounds them), so these partitions' width costs no
# retention its precision; wide, they stay few where the dead letter's 180 days would make one
# partition a day. Every lookup that no state prunes (a job by id, above all) plans over every
# partition: about 35 with the defaults, not 210 (3 ms against 34 to 48 ms, measured with 200
# jobs while the machine ran other work: docs/how-to/history-partitions.md).
DISCARDED_MIN_DAYS = 30


def width_days(state: str) -> int:
    """The days one partition of ``state`` holds: ``OJS["HISTORY_PARTITION_DAYS"]``, and for
    discarded jobs at least ``DISCARDED_MIN_DAYS``."""
    days = int(ojs_settings.HISTORY_PARTITION_DAYS)
    return max(days, DISCARDED_MIN_DAYS) if state == JobState.DISCARDED.value else days


# ---------------------------------------------------------------------------------------------
# The DDL of the tree


@dataclass(frozen=True)
class IndexTemplate:
    """One index of a partition: its name's stem and its CREATE statement with ``{name}``/``{table}``."""

    stem: str
    sql: str

    def create(self, table: str, suffix: str) -> str:
        return self.sql.format(name=_quote(f"{self.stem}_{suffix}"), table=_quote(table))


def index_templates(model: Any, editor: BaseDatabaseSchemaEditor) -> tuple[list[IndexTemplate], dict[str, list[IndexTemplate]]]:
    """The live partition's indexes, and each terminal state's, from the model's own
    definitions (the predicates stay exactly those the queries were written against)."""
    quoted_table = _quote(model._meta.db_table)

    def template(stem: str, statement: Any, *, unique: bool = True) -> IndexTemplate:
        sql = str(statement).replace("{", "{{").replace("}", "}}")  # literal braces survive format()
        sql = sql.replace(_quote(stem), "{name}", 1).replace(f"ON {quoted_table}", "ON {table}", 1)
        if not unique:
            sql = sql.replace("CREATE UNIQUE INDEX", "CREATE INDEX", 1)
        return IndexTemplate(stem, sql.replace(f"{quoted_table}.", ""))

    # seq and id: unique on the live partition, where every job is made and which every move
    # leaves from; on history plain indexes (a partitioned index cannot be unique without the
    # partition key, and rows arrive there from the live partition, unique already).
    live = [
        IndexTemplate(f"{TABLE}_pkey", "CREATE UNIQUE INDEX {name} ON {table} (seq)"),
        IndexTemplate(f"{TABLE}_id_key", "CREATE UNIQUE INDEX {name} ON {table} (id)"),
    ]
    history: dict[str, list[IndexTemplate]] = {
        state: [
            IndexTemplate(f"{TABLE}_pkey", "CREATE INDEX {name} ON {table} (seq)"),
            IndexTemplate(f"{TABLE}_id_key", "CREATE INDEX {name} ON {table} (id)"),
        ]
        for state in TERMINAL_STATES
    }
    for index in model._meta.indexes:
        made = template(index.name, index.create_sql(model, editor))
        if index.name not in HISTORY_ONLY:
            live.append(made)
        for state in ON_HISTORY.get(index.name, ()):
            history[state].append(made)
    for constraint in model._meta.constraints:  # the unique key: unique among live jobs only
        live.append(template(constraint.name, constraint.create_sql(model, editor)))
        for state in TERMINAL_STATES:  # found by unique.admit's explicit look at history
            history[state].append(template(constraint.name, constraint.create_sql(model, editor), unique=False))
    for stem, sql in SEARCH_INDEXES.items():
        live.append(IndexTemplate(stem, sql))
        for state in TERMINAL_STATES:
            history[state].append(IndexTemplate(stem, sql))
    for stem, (sql, states) in HISTORY_INDEXES.items():
        for state in states:
            history[state].append(IndexTemplate(stem, sql))
    return live, history


def tree_statements(model: Any, editor: BaseDatabaseSchemaEditor, parent: str, *, like: str) -> list[str]:
    """CREATE the partitioned tree under the name ``parent``, its columns those of ``like``.

    Leaves and indexes get their final names (``django_ojs_job_live``, ...): they do not clash
    with the plain table's, so the tree can be built beside it and renamed in at the swap.
    ``seq`` takes its numbers from a sequence of its own (an identity column cannot be on a
    partitioned table before PostgreSQL 17); the swap sets it past the plain table's.
    """
    live, history = index_templates(model, editor)
    sequence = f"{parent}_seq"
    statements = [
        f"CREATE TABLE {_quote(parent)} (LIKE {_quote(like)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
        "INCLUDING STORAGE) PARTITION BY LIST (state)",
        f"CREATE SEQUENCE {_quote(sequence)} OWNED BY {_quote(parent)}.seq",
        f"ALTER TABLE {_quote(parent)} ALTER COLUMN seq SET DEFAULT nextval('{sequence}')",
        f"CREATE TABLE {_quote(LIVE)} PARTITION OF {_quote(parent)} FOR VALUES IN ({_literals(LIVE_STATES)})",
    ]
    statements += [index.create(LIVE, "live") for index in live]
    statements.append(RETURNED_TRIGGER.format(table=_quote(LIVE)))
    for state in TERMINAL_STATES:
        middle = f"{TABLE}_{state}"
        statements.append(
            f"CREATE TABLE {_quote(middle)} PARTITION OF {_quote(parent)} FOR VALUES IN ('{state}') "
            "PARTITION BY RANGE (finished_at)"
        )
        statements += [index.create(middle, state) for index in history[state]]
        statements += _leaf_statements(history[state], state, None, parent_of_leaf=middle)
    return statements


def _leaf_statements(
    indexes: list[IndexTemplate], state: str, day: dt.date | None, *, parent_of_leaf: str,
    end: dt.date | None = None,
) -> list[str]:
    """A day's (or the DEFAULT) partition, made apart with its named indexes and then attached:
    ATTACH takes a lighter lock on the parent than CREATE ... PARTITION OF, and the leaf's
    indexes keep names an operator recognises in a plan (``ojs_job_finished_completed_20261127``).
    It holds ``width_days(state)`` days from ``day``, or up to ``end`` when given."""
    suffix = f"{state}_{day:%Y%m%d}" if day else f"{state}_default"
    leaf = f"{TABLE}_{suffix}"
    if day is None:
        bound = "DEFAULT"
    else:
        end = end or day + dt.timedelta(days=width_days(state))
        bound = f"FOR VALUES FROM ('{day.isoformat()} 00:00:00+00') TO ('{end.isoformat()} 00:00:00+00')"
    return [
        f"CREATE TABLE {_quote(leaf)} (LIKE {_quote(parent_of_leaf)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
        "INCLUDING STORAGE)",
        *(index.create(leaf, suffix) for index in indexes),
        f"ALTER TABLE {_quote(parent_of_leaf)} ATTACH PARTITION {_quote(leaf)} {bound}",
    ]


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def _literals(values: Iterable[str]) -> str:
    return ", ".join(f"'{value}'" for value in values)


# ---------------------------------------------------------------------------------------------
# What is there


@dataclass(frozen=True)
class DayPartition:
    name: str
    state: str
    start: dt.date | None  # None: the DEFAULT partition
    end: dt.date | None


def day_partitions(cursor: Any) -> list[DayPartition]:
    """Every leaf under the terminal states' range partitions, oldest first per state."""
    cursor.execute(
        """SELECT leaf.relname, mid.relname, pg_get_expr(leaf.relpartbound, leaf.oid)
           FROM pg_inherits AS up
           JOIN pg_class AS mid ON mid.oid = up.inhrelid
           JOIN pg_inherits AS down ON down.inhparent = mid.oid
           JOIN pg_class AS leaf ON leaf.oid = down.inhrelid
           WHERE up.inhparent = to_regclass(%s)""",
        [TABLE],
    )
    found = []
    for leaf, middle, bound in cursor.fetchall():
        state = middle.removeprefix(f"{TABLE}_")
        if bound == "DEFAULT":
            found.append(DayPartition(leaf, state, None, None))
            continue
        # FOR VALUES FROM ('2026-11-27 00:00:00+00') TO ('2026-11-28 00:00:00+00')
        parts = bound.split("'")
        found.append(DayPartition(leaf, state, _date_of(parts[1]), _date_of(parts[3])))
    return sorted(found, key=lambda p: (p.state, p.start is None, p.start or dt.date.min))


def _date_of(text: str) -> dt.date:
    return dt.datetime.fromisoformat(text.replace(" ", "T")).astimezone(dt.UTC).date()


def oldest_day_starts() -> dict[str, dt.datetime] | None:
    """Per terminal state, where its oldest day partition begins: the DELETE prune keeps below it
    (rows there can only be in the DEFAULT partition), so day partitions go by DROP alone.
    None when the partitions could not be read within ``LOCK_TIMEOUT`` (``bounded_locks``)."""
    starts: dict[str, dt.datetime] = {}
    with bounded_locks("read the oldest days") as cursor:
        for partition in day_partitions(cursor):
            if partition.start is not None and partition.state not in starts:
                starts[partition.state] = dt.datetime.combine(partition.start, dt.time(), dt.UTC)
        return starts
    return None


@contextmanager
def bounded_locks(what: str, subject: str = "job history partitions") -> Iterator[Any]:
    """A transaction whose locks are waited for at most ``LOCK_TIMEOUT`` (PostgreSQL); its cursor.

    Reading the partition tree opens every leaf (``pg_get_expr`` of its bound), and the prune's
    DELETEs and orphan checks read the whole job table: an operator's ``VACUUM FULL`` or ``LOCK
    TABLE`` on one day partition would hold the reaper -- and with it every duty after the prune,
    requeueing lapsed leases among them -- for as long as it runs. A lock not had in time is
    logged (``subject: could not what``) and swallowed, and the statement after the ``with``
    runs: the work is the next pass's.
    """
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            yield cursor
    except OperationalError as exc:
        if not lock_not_had(exc):
            raise
        logger.warning("%s: could not %s (%s); next pass tries again", subject, what, _first_line(exc))


def live_jobs() -> QuerySet:
    """Jobs in the live partition's states. A statement that names them is planned and locked on
    the live partition alone, not on every day partition of history: no planning over some 40
    partitions, and no wait behind an operator's VACUUM FULL or LOCK TABLE of one. For writes to
    jobs a transaction holds in one of these states (``row_updates.update_rows`` keeps the filter)."""
    return Job.objects.filter(state__in=LIVE_STATES)


def lock_not_had(exc: BaseException) -> bool:
    """Is ``exc`` PostgreSQL's lock timeout (``LOCK_NOT_AVAILABLE``)?"""
    return _sqlstate(exc) == LOCK_NOT_AVAILABLE


def cancelled(exc: BaseException) -> bool:
    """Is ``exc`` a statement cancelled (``QUERY_CANCELED``: ``pg_cancel_backend``, a statement timeout)?"""
    return _sqlstate(exc) == QUERY_CANCELED


def _first_line(exc: BaseException) -> str:
    """The error's first line, for a log line: PostgreSQL adds ``LINE 1:`` and a caret below it."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _sqlstate(exc: BaseException) -> str | None:
    error = exc.__cause__ if exc.__cause__ is not None else exc
    return getattr(error, "sqlstate", None)


def retention_of(state: str) -> dt.timedelta:
    """How long a day partition of ``state`` is kept past its end: a discarded one holds dead
    letters, kept longest (plain discards in it go earlier by the DELETE prune)."""
    retention = ojs_settings.RETENTION
    if state == JobState.DISCARDED.value:
        return dt.timedelta(seconds=max(retention["discarded"], retention["dead_letter"]))
    return dt.timedelta(seconds=retention[state])


# ---------------------------------------------------------------------------------------------
# Upkeep: the reaper's prune pass


def maintain(now: dt.datetime, model: Any = None) -> dict[str, list[str]]:
    """Create the coming days' partitions and drop those past retention; what it did, by name.

    One reaper at a time (an advisory lock; the others skip). Reading the partitions waits at
    most ``LOCK_TIMEOUT`` for its locks, each DDL statement ``DDL_LOCK_TIMEOUT``: what is not
    done now is next pass's work.
    """
    done: dict[str, list[str]] = {"created": [], "dropped": []}
    if not is_partitioned():
        return done
    existing = None
    with bounded_locks("read the partitions") as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [UPKEEP_LOCK])
        if cursor.fetchone()[0]:
            existing = day_partitions(cursor)
    if existing is None:
        return done  # another reaper's pass, or the partitions not readable in time
    done["created"] = _create_ahead(now, existing, model)
    done["dropped"] = _drop_expired(now, existing)
    for verb, names in done.items():
        if names:
            logger.info("job history partitions %s: %s", verb, ", ".join(names))
    return done


def days_to_cover(now: dt.datetime, state: str) -> list[dt.date]:
    """The starts of ``state``'s partitions for today and the next ``DAYS_AHEAD`` days (UTC)."""
    width = width_days(state)
    today = now.astimezone(dt.UTC).date()
    first = dt.date.fromordinal(today.toordinal() - (today.toordinal() % width))
    starts, day = [], first
    while day <= today + dt.timedelta(days=DAYS_AHEAD):
        starts.append(day)
        day += dt.timedelta(days=width)
    return starts


def _create_ahead(now: dt.datetime, existing: list[DayPartition], model: Any) -> list[str]:
    model = model or Job  # a migration passes its historical model
    created = []
    with connection.schema_editor(collect_sql=True, atomic=False) as editor:
        _, history = index_templates(model, editor)
    today = now.astimezone(dt.UTC).date()
    for state in TERMINAL_STATES:
        for day in days_to_cover(now, state):
            block = (day, day + dt.timedelta(days=width_days(state)))
            spans = _uncovered(existing, state, *block)
            if spans != [block]:
                # Partitions of another width (HISTORY_PARTITION_DAYS changed) hold some of these
                # days: the rest get partitions of their own, from today on, so that no coming day
                # falls to the DEFAULT partition, which only a DELETE prunes.
                spans = [(max(start, today), end) for start, end in spans if end > today]
            for start, end in spans:
                statements = _leaf_statements(history[state], state, start, end=end,
                                              parent_of_leaf=f"{TABLE}_{state}")
                if _run_ddl(statements, f"create the {state} partition of {start}"):
                    created.append(f"{TABLE}_{state}_{start:%Y%m%d}")
    return created


def _uncovered(existing: list[DayPartition], state: str, start: dt.date, end: dt.date) -> list[tuple[dt.date, dt.date]]:
    """The spans of ``[start, end)`` that no partition of ``state`` holds, in order."""
    held = sorted((p.start, p.end) for p in existing
                  if p.state == state and p.start and p.end and p.start < end and start < p.end)
    spans, at = [], start
    for held_start, held_end in held:
        if held_start > at:
            spans.append((at, held_start))
        at = max(at, held_end)
    if at < end:
        spans.append((at, end))
    return spans


def _drop_expired(now: dt.datetime, existing: list[DayPartition]) -> list[str]:
    dropped = []
    for partition in existing:
        if partition.end is None:
            continue
        end = dt.datetime.combine(partition.end, dt.time(), dt.UTC)
        if end > now - retention_of(partition.state):
            continue
        forget_history_of(partition.name)
        if _run_ddl([f"DROP TABLE {_quote(partition.name)}"], f"drop {partition.name}"):
            dropped.append(partition.name)
    return dropped


def forget_history_of(leaf: str, batch: int = FORGET_BATCH) -> int:
    """Empty one partition about to be dropped: its jobs with their errors, durable steps and
    (``EVENTS_KEPT_WITH_JOB``) events, set-based, joined to the partition, in batches of
    ``batch`` jobs, each its own transaction. Returns how many jobs it deleted."""
    table = _quote(leaf)
    walked, after = 0, 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SELECT max(seq), count(*) FROM (SELECT seq FROM {table} WHERE seq > %s "
                           "ORDER BY seq LIMIT %s) AS b", [after, batch])
            last, count = cursor.fetchone()
            if not count:
                return walked
            jobs = f"SELECT {{column}} FROM {table} WHERE seq > %s AND seq <= %s"
            for related in (JobError, JobStep):
                cursor.execute(
                    f"DELETE FROM {_quote(related._meta.db_table)} WHERE job_id IN ({jobs.format(column='seq')})",
                    [after, last],
                )
            if ojs_settings.EVENTS_KEPT_WITH_JOB:
                cursor.execute(
                    f"DELETE FROM {_quote(Event._meta.db_table)} WHERE job_id IN ({jobs.format(column='id')})",
                    [after, last],
                )
            # And the jobs: a walk cut short (a reaper stopped) or a DROP that did not get its lock
            # starts again where this one ended, not from the partition's first job.
            cursor.execute(f"DELETE FROM {table} WHERE seq > %s AND seq <= %s", [after, last])
        walked += count
        after = last


def build_history_indexes(using: Any = None) -> list[str]:
    """Give the terminal partitions the ``HISTORY_INDEXES`` they lack, online; what it built, by name.

    Each is made as PostgreSQL makes a partitioned index without blocking writes: an index ON ONLY
    the state's partition (no rows read, invalid until complete), then one per leaf built
    CONCURRENTLY and attached to it; with the last leaf attached it becomes valid. A partition
    made meanwhile by the reaper gets the index from its CREATE and is attached with it. A leaf
    whose concurrent build failed before (an invalid index left) is built again. Idempotent:
    nothing to do is a few catalog reads. Needs autocommit (no CONCURRENTLY in a transaction).
    """
    conn = using or connection
    built: list[str] = []
    if not is_partitioned(conn):
        return built
    with conn.cursor() as cursor:
        leaves = day_partitions(cursor)
        for stem, (sql, states) in HISTORY_INDEXES.items():
            for state in states:
                middle, parent_index = f"{TABLE}_{state}", f"{stem}_{state}"
                if _index_valid(cursor, parent_index) is None:
                    cursor.execute(sql.replace("ON {table}", "ON ONLY {table}").format(
                        name=_quote(parent_index), table=_quote(middle)))
                    built.append(parent_index)
                for leaf in (p.name for p in leaves if p.state == state):
                    name = f"{stem}_{leaf.removeprefix(f'{TABLE}_')}"
                    valid = _index_valid(cursor, name)
                    if valid is False:  # a concurrent build that failed: its index is unusable
                        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_quote(name)}")
                    if not valid:
                        if _index_valid(cursor, leaf) is None:
                            continue  # dropped meanwhile by retention
                        cursor.execute(sql.replace("CREATE INDEX", "CREATE INDEX CONCURRENTLY", 1).format(
                            name=_quote(name), table=_quote(leaf)))
                        built.append(name)
                    cursor.execute("SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(%s) "
                                   "AND inhparent = to_regclass(%s)", [name, parent_index])
                    if cursor.fetchone() is None:
                        cursor.execute(f"ALTER INDEX {_quote(parent_index)} ATTACH PARTITION {_quote(name)}")
    return built


def drop_history_indexes(using: Any, stems: Iterable[str]) -> None:
    """Drop the ``HISTORY_INDEXES`` named by ``stems`` (a migration reversed); nothing where there are none."""
    if using.vendor != "postgresql":
        return
    with using.cursor() as cursor:
        for stem in stems:
            for state in HISTORY_INDEXES[stem][1]:
                # Dropping a partitioned index drops its leaves' with it.
                cursor.execute(f"DROP INDEX IF EXISTS {using.ops.quote_name(f'{stem}_{state}')}")


def _index_valid(cursor: Any, name: str) -> bool | None:
    """Whether the relation ``name`` is a valid index (True for a table); None: there is none."""
    cursor.execute(
        "SELECT coalesce(i.indisvalid, true) FROM pg_class AS c LEFT JOIN pg_index AS i ON i.indexrelid = c.oid "
        "WHERE c.oid = to_regclass(%s)",
        [name],
    )
    row = cursor.fetchone()
    return None if row is None else bool(row[0])


def _run_ddl(statements: list[str], what: str) -> bool:
    """Run ``statements`` in one transaction under ``DDL_LOCK_TIMEOUT``; False (logged) when it could not."""
    began = None
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            began = lock_try_began(cursor, DDL_LOCK_TIMEOUT)
            for statement in statements:
                cursor.execute(statement)
    except Exception as exc:  # a lock not had in time, rows of that day in the DEFAULT partition
        held = f"; {lock_holders(began)}" if lock_not_had(exc) and began else ""
        logger.warning("job history partitions: could not %s (%s%s); next pass tries again",
                       what, _first_line(exc), held)
        return False
    return True


def lock_try_began(cursor: Any, timeout: str) -> dt.datetime:
    """Start a try at a lock in the cursor's transaction: set its lock timeout, and return the
    database's clock, for ``lock_holders`` to tell the sessions it waited for from those that
    queued behind it."""
    cursor.execute(f"SET LOCAL lock_timeout = '{timeout}'")
    cursor.execute("SELECT clock_timestamp()")
    return cursor.fetchone()[0]


def lock_holders(began: dt.datetime, limit: int = 3) -> str:
    """The oldest transactions of other sessions, begun before a try at a lock that began at
    ``began`` and holding locks on the job tables: those it waited for, not those that queued
    behind it meanwhile. For a line that says what held it: ``held by pid 4242 (idle in
    transaction for 312 s: SELECT ...)``. An operator can look at them, or ``pg_cancel_backend`` one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.pid, a.state, floor(extract(epoch FROM now() - a.xact_start))::bigint,"
            " left(regexp_replace(a.query, '\\s+', ' ', 'g'), 80) FROM pg_stat_activity AS a"
            " WHERE a.pid <> pg_backend_pid() AND a.xact_start < %s AND a.pid IN ("
            "  SELECT l.pid FROM pg_locks AS l WHERE l.granted"
            # A relation's oid names it only within its database; pg_locks lists every database's.
            "   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            "   AND l.relation IN"
            # The table and its partitions (none when it is one plain table).
            "  (SELECT %s::regclass UNION SELECT relid FROM pg_partition_tree(%s::regclass)))"
            " ORDER BY a.xact_start LIMIT %s",
            [began, TABLE, TABLE, limit],
        )
        sessions = [f"pid {pid} ({state} for {seconds} s: {query})" for pid, state, seconds, query in cursor.fetchall()]
    return "held by " + ", ".join(sessions) if sessions else "held by a session since gone"


# ---------------------------------------------------------------------------------------------
# Reading a page partition by partition

def slice_by_partition(rows: QuerySet, start: int, stop: int, states: Iterable[str] = ()) -> list[Any] | None:
    """``rows[start:stop]`` of an ordered query of jobs, each partition read apart under its own
    LIMIT and the pieces merged, in one statement (one snapshot); None where it cannot be read so
    (one plain table, SQLite; a partition dropped meanwhile), for the caller to read it as it is.

    The planner makes a query of the partitioned table one merge of the partitions, costed by
    how soon it yields its first rows; but a merge reads a first row from every partition before
    it yields one, and a partition that holds none of the rows wanted is then read whole (a range
    of creation times, at ten million jobs: 1.8 s, each day after the range walked along seq).
    Planned alone with its LIMIT, each partition takes the index that suits its own rows: a day
    that holds few of them finds them by ``ojs_job_created``, one that holds many walks
    ``ojs_job_seq_created`` (``_first_of_leaf``).
    ``states``, when the query names them, leaves out the partitions of other states, as the
    planner would have (a partition named in the statement is read whatever its state).

    Each piece is ``rows`` itself with its base table pointed at one leaf (``FROM leaf
    "django_ojs_job"``): every column, subquery and parameter stays Django's own, and the pieces
    are one ``UNION ALL`` (each in parentheses with its ORDER BY and LIMIT) under the same order.
    """
    conn = connections[rows.db]
    if not is_partitioned(conn) or not rows.query.order_by:
        return None  # (an order from Meta alone would not reach the union's parts)
    wanted = set(states) or set(LIVE_STATES + TERMINAL_STATES)
    with conn.cursor() as cursor:
        leaves = [LIVE] if wanted & set(LIVE_STATES) else []
        leaves += [p.name for p in day_partitions(cursor) if p.state in wanted]
    return read_leaves(rows, leaves, start, stop) if leaves else None


def read_leaves(rows: QuerySet, leaves: Sequence[str], start: int, stop: int) -> list[Any] | None:
    """``slice_by_partition`` of the partitions ``leaves``; None when one of them is gone."""
    pieces = [_first_of_leaf(rows, leaf, stop) for leaf in leaves]
    merged = pieces[0].union(*pieces[1:], all=True).order_by(*rows.query.order_by) if len(pieces) > 1 else pieces[0]
    try:
        with transaction.atomic(using=rows.db):
            return list(merged[start:stop])
    except ProgrammingError as exc:
        if getattr(exc.__cause__, "sqlstate", None) == UNDEFINED_TABLE:
            return None  # a partition dropped by retention meanwhile
        raise


def _first_of_leaf(rows: QuerySet, leaf: str, stop: int) -> QuerySet:
    """The first ``stop`` of ``rows`` in ``leaf``, found by their ``seq`` alone, then read: where
    the list's order and filter are in one index (``ojs_job_seq_created``: a creation range by
    seq), the rows are found in the index alone and only those shown are read. (Planned as one
    query, the same index with each row read costs more to the planner than ``seq`` alone, the
    matches assumed spread evenly: a day holding the range's end was walked row by row from its
    newest job back to the range.)"""
    found = on_leaf(rows, leaf).values("seq")[:stop]
    return on_leaf(rows, leaf).filter(seq__in=found)[:stop]


def on_leaf(rows: QuerySet, leaf: str) -> QuerySet:
    """``rows`` read from the partition ``leaf`` alone, under the job table's alias, so every
    column, filter and order of ``rows`` reads the leaf's. Made last: a join to the job table
    added to the piece afterwards would take the job table's name as its alias too."""
    piece = rows.all()
    query = piece.query
    alias = query.get_initial_alias()
    query.alias_map[alias] = BaseTable(leaf, alias)
    # The alias now names the leaf (a subquery's relabelling looks it up there); a clone
    # shares these lists, so each is made anew.
    others = [name for name in query.table_map.get(TABLE, []) if name != alias]
    query.table_map = {**query.table_map, TABLE: others, leaf: [alias]}
    return piece


# ---------------------------------------------------------------------------------------------
# What an operator sees


@dataclass(frozen=True)
class PartitionRow:
    name: str
    holds: str
    rows: int


def status() -> Iterator[PartitionRow]:
    """Every partition of the job table with what it holds and its rows (exact counts)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {_quote(LIVE)}")
        yield PartitionRow(LIVE, ", ".join(LIVE_STATES), cursor.fetchone()[0])
        for partition in day_partitions(cursor):
            cursor.execute(f"SELECT count(*) FROM {_quote(partition.name)}")
            if partition.start is None:
                holds = f"{partition.state}, days without a partition"
            else:
                holds = f"{partition.state}, finished {partition.start} .. {partition.end}"
            yield PartitionRow(partition.name, holds, cursor.fetchone()[0])
