"""Chaos: real workers and reapers killed, terminated and frozen, and PostgreSQL restarted, under load.

``python -m tests.chaos`` (a person; ``--long`` for 20,000 jobs) and
``test_chaos.py`` (CI) run the same thing (``run.py``): a throwaway
PostgreSQL cluster, ``ojs_worker`` and ``ojs_reaper`` processes with fast
timings (``plan.py``), mixed handlers that record every execution
(``app/``), a seeded driver that hurts the fleet (``driver.py``), and a
verdict read from the store, the records and the PostgreSQL log
(``verdict.py``): no job lost or left open, every outcome as its handler
dictates, no attempt run twice, every re-run explained by an error of the
attempt before, no deadlock, no worker declared dead that was alive.

``test_outage.py`` stops the cluster for ten seconds under a running API,
worker and reaper (docs/explanation/reliability.md).
"""
