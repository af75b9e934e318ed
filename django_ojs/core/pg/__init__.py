"""The PostgreSQL engine: the common cases of PUSH, FETCH, ACK and the worker's turn, each one statement.

``core/engine.py`` decides once whether this engine runs (PostgreSQL, and
``OJS["ONE_STATEMENT_PATHS"]``); the operations in ``core`` ask it first and
take their stepwise path for whatever it declines.
"""
