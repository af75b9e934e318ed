"""The core's contract: its behaviour, asserted the same way on every engine.

Push, claim, settle, control, workers, maintenance, limits, unique jobs and
workflows, through the operations (``Job.objects.push()`` and the rest). CI
runs these modules three times with the same assertions:

- PostgreSQL with the one-statement engine (``tox -e py311-django52``, ``py312-django6``);
- PostgreSQL forced stepwise (``tox -e stepwise``: ``OJS_TEST_ENGINE=stepwise``,
  ``OJS["ONE_STATEMENT_PATHS"] = False``), the path PostgreSQL takes whenever a
  statement declines;
- SQLite (``tox -e sqlite``), where tests marked ``postgres`` are skipped.

A test that holds for one engine only belongs elsewhere: ``tests/core/pg`` for
the PostgreSQL engine's statements and plans.
"""
