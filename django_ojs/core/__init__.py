"""The core: every state change of a job, one transaction each, and the reads every door shares.

The operations are functions of these modules, which import the models at
their top; the models' managers (``Job.objects.push()``, ...) delegate to
them through ``operations.py``. ``engine.py`` decides whether PostgreSQL's
one-statement paths (``pg/``) answer first.
"""
