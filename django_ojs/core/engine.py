"""The one switch between the two ways the core's operations reach the database.

Every operation is written once, in ORM steps that run on every database
(``core/push.py``, ``claim.py``, ``settle.py``, ``turn.py``). On PostgreSQL
their common cases are also written as one statement each (``core/pg``).
An operation asks the current engine first; whatever the engine declines
(``None``), it does in its steps:

=========================  ==========================================  ===============================
engine method              one statement (``core/pg``)                 stepwise twin (``core``)
=========================  ==========================================  ===============================
``push_plain``             ``pg/push.py`` ``insert``                   ``push.push_many``'s transaction
``claim_queue``            ``pg/claim.py`` ``claim``;                  ``claim.claim_from``
                           a fair queue ``pg/fair_claim.py``
``turn``                   ``pg/turn.py`` ``turn``                     ``turn.settle_and_fetch``'s transaction
``ack_alone``, ``ack``     ``pg/settle.py`` ``ack``                    ``settle.ack``'s transaction
``lock_settled``           ``pg/settle.py`` ``lock_settled``           ``settle.settle_many``'s ORM lock
``complete_rows``          ``pg/settle.py`` ``complete_rows``          ``settle.complete_rows``'s UPDATE
``record_job_events``      ``pg/events.py`` ``insert_from_rows``       ``events.record`` of ``job_event``
``queues_with_work``       one probe of every queue                    every queue, probed by the claim
=========================  ==========================================  ===============================

The stepwise engine (``core/stepwise.py``) declines everything, so every
operation runs its steps. It is the engine on SQLite, and on
PostgreSQL with ``OJS["ONE_STATEMENT_PATHS"] = False`` -- which the contract
suite (``tests/core/contract``) sets to run the core's behaviour both ways
on PostgreSQL, with the same assertions. ``current()`` decides, here only.
"""

from __future__ import annotations

from django.db import connection

from ..conf import ojs_settings
from .pg.engine import PostgresEngine
from .stepwise import StepwiseEngine

STEPWISE = StepwiseEngine()
POSTGRES = PostgresEngine()


def current() -> StepwiseEngine:
    """The engine for the default database now: PostgreSQL's statements, or the stepwise engine."""
    if connection.vendor == "postgresql" and ojs_settings.ONE_STATEMENT_PATHS:
        return POSTGRES
    return STEPWISE
