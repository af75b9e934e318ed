"""From one job table to the partitioned layout (``core/partitions.py``), online, in batches, resumable.

``manage.py ojs_partition migrate`` (docs/how-to/history-partitions.md):

1. ``start``: build the partitioned tree beside the table as ``django_ojs_job_next``, with a
   day partition for every day of history still kept, and install a row trigger on the
   table that mirrors every INSERT, UPDATE and DELETE into it (delete the row by ``seq``,
   insert the new one). From then on every change reaches both.
2. ``copy_batch``: copy the rows up to the highest ``seq`` seen at start, one ``seq`` range
   (that of the next ``batch_size`` rows) per transaction: lock the range's rows (claims skip them, writers wait a moment; a row
   another session holds is waited for in ``LOCK_TRIES``, as the DDL below is), delete
   those rows from the tree, insert them from the table, record how far it got in a progress
   row. A rerun resumes where the last batch committed.
3. ``swap``: in one short transaction under ``ACCESS EXCLUSIVE``: check that both hold as
   many rows, drop the trigger, rename the table ``django_ojs_job_unpartitioned`` and the tree
   ``django_ojs_job``, set its sequence past every ``seq`` given out, move the NOTIFY triggers.
   Statements of other sessions, prepared ones included, find the new table by its name.

The table stays behind until ``drop_old``; ``unpartition`` is the way back (offline).
Migration 0024 runs all three at once, inside the migration, when the table is small.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import OperationalError, connection, transaction

from . import partitions
from .partitions import TABLE, _quote

logger = logging.getLogger("django_ojs.partitions")

NEXT = f"{TABLE}_next"
OLD = f"{TABLE}_unpartitioned"
PROGRESS = f"{TABLE}_partitioning"
MIRROR = "django_ojs_job_mirror"
# The trigger's creation and the swap take locks that every writer of the job table queues
# behind while they wait for them (a long query -- a report, pg_dump -- holds them up); a copy
# batch waiting for a row someone holds keeps the rows it locked before it. So each try
# waits a short while, then gives up and lets the writers through before the next; later tries
# wait longer, for a table whose transactions are long. Seconds each try waits for its locks:
LOCK_TRIES = (0.2, 0.2, 0.5, 0.5, 1.0, 1.0, 2.0, 2.0)
# Seconds between two tries: the writers that queued meanwhile get through.
LOCK_TRY_PAUSE = 1.0


class MigrationError(Exception):
    """The migration cannot go on; the message says why and what to do."""


@dataclass
class Progress:
    copied_through: int
    copy_until: int
    started_at: dt.datetime
    swapped_at: dt.datetime | None

    @property
    def copied_all(self) -> bool:
        return self.copied_through >= self.copy_until


def _exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        return bool(cursor.fetchone()[0])


def progress() -> Progress | None:
    """Where the migration stands; None if it never started."""
    if not _exists(PROGRESS):
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT copied_through, copy_until, started_at, swapped_at FROM {PROGRESS}")
        row = cursor.fetchone()
    return Progress(*row) if row else None


def _columns() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum",
            [TABLE],
        )
        return [_quote(row[0]) for row in cursor.fetchall()]


def _build_tree(model: Any) -> None:
    """The tree beside the table, with a day partition for every kept day of its history."""
    with connection.schema_editor(collect_sql=True, atomic=False) as editor:
        statements = partitions.tree_statements(model, editor, NEXT, like=TABLE)
        _, history = partitions.index_templates(model, editor)
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
        cursor.execute("SELECT now()")
        now = cursor.fetchone()[0]
        for state in partitions.TERMINAL_STATES:
            cursor.execute(f"SELECT min(finished_at) FROM {_quote(TABLE)} WHERE state = %s", [state])
            oldest = cursor.fetchone()[0]
            kept_from = now - partitions.retention_of(state)
            first = max(oldest, kept_from) if oldest is not None else now
            for day in _days_from(first, now, state):
                statements = partitions._leaf_statements(
                    history[state], state, day, parent_of_leaf=f"{TABLE}_{state}"
                )
                for statement in statements:
                    cursor.execute(statement)


def _days_from(first: dt.datetime, now: dt.datetime, state: str) -> list[dt.date]:
    width = partitions.width_days(state)
    covered = partitions.days_to_cover(now, state)
    day = first.astimezone(dt.UTC).date()
    day = dt.date.fromordinal(day.toordinal() - (day.toordinal() % width))
    days = []
    while day < covered[0]:
        days.append(day)
        day += dt.timedelta(days=width)
    return days + covered


def start(model: Any) -> Progress:
    """Build the tree and install the mirror trigger; a no-op when that was done already."""
    if partitions.is_partitioned():
        raise MigrationError("the job table is partitioned already")
    current = progress()
    if current is not None and _exists(NEXT):
        return current

    def install(cursor: Any) -> None:
        _drop_leftovers()
        _build_tree(model)
        columns = _columns()
        cursor.execute(
            f"""CREATE FUNCTION {MIRROR}() RETURNS trigger AS $$
            BEGIN
                IF TG_OP <> 'INSERT' THEN
                    DELETE FROM {_quote(NEXT)} WHERE seq = OLD.seq AND state = OLD.state;
                END IF;
                IF TG_OP <> 'DELETE' THEN
                    INSERT INTO {_quote(NEXT)} ({", ".join(columns)})
                    VALUES ({", ".join("NEW." + column for column in columns)});
                END IF;
                RETURN NULL;
            END $$ LANGUAGE plpgsql"""
        )
        # CREATE TRIGGER waits for the table's writers in flight, and writers queue behind it.
        cursor.execute(
            f"CREATE TRIGGER {MIRROR} AFTER INSERT OR UPDATE OR DELETE ON {_quote(TABLE)} "
            f"FOR EACH ROW EXECUTE FUNCTION {MIRROR}()"
        )
        cursor.execute(
            f"CREATE TABLE {PROGRESS} (id smallint PRIMARY KEY DEFAULT 1, copied_through bigint NOT NULL, "
            "copy_until bigint NOT NULL, started_at timestamptz NOT NULL, swapped_at timestamptz)"
        )
        # With the trigger made, no writer is in flight (CREATE TRIGGER waited for them) and each
        # later one is mirrored: the copy needs to go no further than the highest seq now. In the
        # trigger's transaction, so no crash leaves a trigger mirroring with no migration to show.
        cursor.execute(f"SELECT coalesce(max(seq), 0) FROM {_quote(TABLE)}")
        until = cursor.fetchone()[0]
        cursor.execute(f"INSERT INTO {PROGRESS} VALUES (1, 0, %s, now(), NULL)", [until])

    in_lock_tries("install the mirror trigger", install)
    found = progress()
    assert found is not None
    return found


def _drop_leftovers() -> None:
    """What a start that failed before its commit cannot have left, or an aborted migration did."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TRIGGER IF EXISTS {MIRROR} ON {_quote(TABLE)}")
        cursor.execute(f"DROP FUNCTION IF EXISTS {MIRROR}()")
        cursor.execute(f"DROP TABLE IF EXISTS {_quote(NEXT)} CASCADE")
        cursor.execute(f"DROP TABLE IF EXISTS {PROGRESS}")


def copy_batch(batch_size: int) -> Progress:
    """Copy the next ``seq`` range in its own transaction; the progress after it.

    The batch locks its rows in ``seq`` order, and a row another session holds (a report's
    ``SELECT ... FOR UPDATE`` left open, a stuck transaction) would keep it waiting, with the
    rows before it locked meanwhile: an ACK of any of them would wait as long. So it waits for
    rows as ``LOCK_TRIES`` says: a try that does not get them in time lets go of all of them,
    says which session held them, and the next try starts after a pause."""

    def copy(cursor: Any) -> None:
        cursor.execute(f"SELECT copied_through, copy_until FROM {PROGRESS} FOR UPDATE")
        after, until = cursor.fetchone()
        if after >= until:
            return
        # The range that holds the next ``batch_size`` jobs: seqs have gaps (jobs pruned, a
        # sequence that went on while its jobs were deleted), and ranges of a fixed width would
        # walk empty ones, each a transaction of its own (and a ``--pause``).
        cursor.execute(
            f"SELECT seq FROM {_quote(TABLE)} WHERE seq > %s AND seq <= %s ORDER BY seq OFFSET %s LIMIT 1",
            [after, until, batch_size - 1],
        )
        found = cursor.fetchone()
        through = found[0] if found else until
        # Writers of these rows wait until this commits; the mirror trigger then carries their
        # change. Only the rows locked here are copied: a row inserted into the range meanwhile
        # (its seq taken before the start, its commit after) is the mirror's alone.
        cursor.execute(
            f"SELECT coalesce(array_agg(seq), '{{}}') FROM (SELECT seq FROM {_quote(TABLE)} "
            "WHERE seq > %s AND seq <= %s ORDER BY seq FOR UPDATE) AS locked",
            [after, through],
        )
        locked = cursor.fetchone()[0]
        cursor.execute(f"DELETE FROM {_quote(NEXT)} WHERE seq = ANY(%s::bigint[])", [locked])
        columns = ", ".join(_columns())
        cursor.execute(
            f"INSERT INTO {_quote(NEXT)} ({columns}) SELECT {columns} FROM {_quote(TABLE)} "
            "WHERE seq = ANY(%s::bigint[])",
            [locked],
        )
        cursor.execute(f"UPDATE {PROGRESS} SET copied_through = %s", [through])

    in_lock_tries("copy the next batch of jobs", copy)
    found = progress()
    assert found is not None
    return found


def swap() -> None:
    """Put the tree in the table's place, in one short transaction (see the module's docstring)."""

    def exchange(cursor: Any) -> None:
        cursor.execute(f"LOCK TABLE {_quote(TABLE)}, {_quote(NEXT)} IN ACCESS EXCLUSIVE MODE")
        _check_counts(cursor)
        cursor.execute(f"DROP TRIGGER {MIRROR} ON {_quote(TABLE)}")
        cursor.execute(f"DROP FUNCTION {MIRROR}()")
        _exchange(cursor, plain=TABLE, tree=NEXT, plain_to=OLD)
        cursor.execute(f"UPDATE {PROGRESS} SET swapped_at = now()")

    in_lock_tries("swap the tables", exchange)


def in_lock_tries(what: str, work: Callable[[Any], None]) -> None:
    """Run ``work(cursor)`` in a transaction whose locks are waited for as ``LOCK_TRIES`` says: a
    try that does not get them in time is rolled back, and the next one starts after a pause.
    When none does, a ``MigrationError`` names the sessions holding the table; nothing changed."""
    for number, wait in enumerate(LOCK_TRIES, 1):
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                began = partitions.lock_try_began(cursor, f"{round(wait * 1000)}ms")
                work(cursor)
            return
        except OperationalError as exc:
            if not partitions.lock_not_had(exc):
                raise
            held = partitions.lock_holders(began)
            if number == len(LOCK_TRIES):
                raise MigrationError(
                    f"could not {what}: the job table's locks were not had in {len(LOCK_TRIES)} tries "
                    f"({held}). Nothing changed: run the command again once they are done."
                ) from exc
            logger.warning("could not %s within %g s (try %d of %d; %s); trying again in %g s",
                           what, wait, number, len(LOCK_TRIES), held, LOCK_TRY_PAUSE)
        time.sleep(LOCK_TRY_PAUSE)


def _check_counts(cursor: Any) -> None:
    cursor.execute(f"SELECT (SELECT count(*) FROM {_quote(TABLE)}), (SELECT count(*) FROM {_quote(NEXT)})")
    plain, tree = cursor.fetchone()
    if plain != tree:
        raise MigrationError(
            f"the partitioned copy holds {tree} jobs, the table {plain}: nothing was swapped. "
            "Run `ojs_partition migrate --restart` to copy again from the start."
        )


def _exchange(cursor: Any, *, plain: str, tree: str, plain_to: str) -> None:
    """Rename the tree in, its sequence past every seq given out, the NOTIFY triggers moved."""
    cursor.execute(partitions.DROP_NOTIFY_TRIGGERS.format(table=_quote(plain)))
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'seq')", [plain])
    old_sequence = cursor.fetchone()[0]
    cursor.execute(f"ALTER TABLE {_quote(plain)} RENAME TO {_quote(plain_to)}")
    cursor.execute(f"ALTER TABLE {_quote(tree)} RENAME TO {_quote(TABLE)}")
    cursor.execute(f"ALTER SEQUENCE {_quote(tree + '_seq')} RENAME TO {_quote(TABLE + '_partitioned_seq')}")
    given = f"(SELECT last_value FROM {old_sequence})" if old_sequence else "0"
    cursor.execute(
        f"SELECT setval('{TABLE}_partitioned_seq', greatest(1, {given}, (SELECT max(seq) FROM {_quote(TABLE)})))"
    )
    cursor.execute(partitions.NOTIFY_TRIGGERS.format(table=_quote(TABLE)))


def run(
    model: Any,
    *,
    batch_size: int = 5000,
    pause: float = 0.0,
    max_batches: int | None = None,
    report: Callable[[Progress], None] = lambda _: None,
) -> Progress:
    """Start (or resume), copy, swap. ``max_batches`` stops early (the next run resumes)."""
    current = start(model) if progress() is None or not _exists(NEXT) else progress()
    assert current is not None
    if current.swapped_at is not None:
        return current
    batches = 0
    while not current.copied_all:
        if max_batches is not None and batches >= max_batches:
            return current
        current = copy_batch(batch_size)
        batches += 1
        report(current)
        if pause:
            time.sleep(pause)
    swap()
    found = progress()
    assert found is not None
    return found


def restart() -> None:
    """Forget a migration in progress: the trigger, the tree and the progress row go. Dropping
    the trigger locks the table as installing it does, so it too waits in ``LOCK_TRIES``."""
    in_lock_tries("undo the migration", lambda cursor: _drop_leftovers())


def left_behind() -> bool:
    """Is the plain table a swap left behind still there?"""
    return _exists(OLD)


def drop_old() -> bool:
    """Drop the table the swap left behind; False if there is none."""
    if not _exists(OLD):
        return False
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {_quote(OLD)}")
        cursor.execute(f"DROP TABLE IF EXISTS {PROGRESS}")
    return True


def partition_in_place(model: Any) -> None:
    """All three steps in the caller's transaction, no trigger: migration 0024 on a small table.

    The table is locked first, so writers wait for the migration (two seconds at its 100,000
    jobs): a job committed after the copy's snapshot would be left in the table dropped at the end.
    """

    def partition(cursor: Any) -> None:
        cursor.execute(f"LOCK TABLE {_quote(TABLE)} IN ACCESS EXCLUSIVE MODE")
        _drop_leftovers()
        _build_tree(model)
        columns = ", ".join(_columns())
        cursor.execute(f"INSERT INTO {_quote(NEXT)} ({columns}) SELECT {columns} FROM {_quote(TABLE)}")
        _exchange(cursor, plain=TABLE, tree=NEXT, plain_to=OLD)
        cursor.execute(f"DROP TABLE {_quote(OLD)}")

    in_lock_tries("partition the job table in place", partition)


def unpartition(model: Any, editor: Any) -> None:
    """The way back, offline (the reverse of migration 0024): one plain table again, as the
    model defines it, with every job copied into it. Writers wait on the lock meanwhile."""
    if not partitions.is_partitioned():
        return
    parked = f"{TABLE}_partitioned"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_quote(OLD)}")  # stale since the swap
        cursor.execute(f"DROP TABLE IF EXISTS {PROGRESS}")
        cursor.execute(f"LOCK TABLE {_quote(TABLE)} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(partitions.DROP_NOTIFY_TRIGGERS.format(table=_quote(TABLE)))
        cursor.execute(f"ALTER TABLE {_quote(TABLE)} RENAME TO {_quote(parked)}")
    editor.create_model(model)
    with connection.cursor() as cursor:
        for stem, sql in partitions.SEARCH_INDEXES.items():
            cursor.execute(sql.format(name=stem, table=_quote(TABLE)))
        columns = ", ".join(_columns())
        cursor.execute(
            f"INSERT INTO {_quote(TABLE)} ({columns}) OVERRIDING SYSTEM VALUE SELECT {columns} FROM {_quote(parked)}"
        )
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'seq'), greatest(1, "
            f"(SELECT last_value FROM {_quote(TABLE + '_partitioned_seq')}), (SELECT max(seq) FROM {_quote(TABLE)})))"
        )
        cursor.execute(f"DROP TABLE {_quote(parked)} CASCADE")
        cursor.execute(partitions.NOTIFY_TRIGGERS.format(table=_quote(TABLE)))
