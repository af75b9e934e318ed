"""A test-only app whose handlers record every execution in the database.

The worker tests read their exactly-once evidence from these rows, written
by the handlers themselves, not from what the worker says it did.
"""
