"""A failed query on SQLite lets go of its cursor in the thread that ran it.

Every database error Django raises sits in a reference cycle: its
``DatabaseErrorWrapper.__exit__`` frame holds the error, whose traceback holds
that frame. The cycle keeps the traceback's frames alive, and with them the
sqlite3 cursor of the failed statement, until Python's cyclic garbage collector
runs -- in whichever thread allocates next. Freeing a cursor resets its
statement, which takes its connection's mutex; a connection that is waiting
out the busy timeout for the write lock holds that mutex all along. So a worker
thread that caught "database is locked" and tried again, and another thread of
the same process that then took the write lock and collected garbage, waited
for each other until the first one's timeout (30 s): every writer of every
process was held back as long, heartbeats too (seen after a long lock, with
progress reports and heartbeats failing in the workers' threads).

The execute wrapper below clears the frames of a failed query's traceback
(``traceback.clear_frames``, what the standard library offers against such
cycles) as the error leaves Django's database layer: the cursor is let go in
the thread that owns it, and the error frees itself when its last reference
goes. The error, its message, its cause and the frames its traceback lists are
kept; only the local variables of those frames, inside Django's database layer
(a debugger's or Django's debug page's view of them), are lost.
"""

from __future__ import annotations

import traceback
from typing import Any

from django.db import DatabaseError


def install(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created``: on a SQLite connection, the wrapper below around every query."""
    if connection.vendor == "sqlite" and forget_frames not in connection.execute_wrappers:
        connection.execute_wrappers.append(forget_frames)


def forget_frames(execute: Any, sql: Any, params: Any, many: bool, context: dict[str, Any]) -> Any:
    try:
        return execute(sql, params, many, context)
    except DatabaseError as exc:
        error: BaseException | None = exc
        seen: set[int] = set()
        while error is not None and id(error) not in seen:
            seen.add(id(error))
            traceback.clear_frames(error.__traceback__)
            error = error.__cause__ or error.__context__
        raise
