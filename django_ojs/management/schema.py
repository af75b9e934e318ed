"""Whether the database has django-ojs's tables as this code expects them, asked before a worker or reaper starts.

Without it, a worker started before ``migrate`` died on its first query with a
traceback ("relation django_ojs_worker does not exist"), and a reaper logged
one per loop and tick, hundreds a second, neither naming the cure; after an
upgrade whose migrations were not run they fail the same way, later, on a
column. A database that does not answer is no verdict: the worker and the
reaper wait for it as they do for any outage.
"""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor


def unapplied_migrations(alias: str = DEFAULT_DB_ALIAS) -> list[str]:
    """The names of django-ojs's migrations not applied to the database, oldest first; [] when it cannot tell."""
    try:
        executor = MigrationExecutor(connections[alias])
        ours = [node for node in executor.loader.graph.leaf_nodes() if node[0] == "django_ojs"]
        plan = executor.migration_plan(ours)
    except DatabaseError:
        return []
    return [migration.name for migration, _backwards in plan if migration.app_label == "django_ojs"]


def require_migrated(command: str) -> None:
    """Refuse to start ``command`` with django-ojs's migrations unapplied, naming them and the cure."""
    missing = unapplied_migrations()
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise CommandError(
            f"{command} cannot start: the database lacks {len(missing)} of django-ojs's migrations ({shown}). "
            "Run manage.py migrate first."
        )
