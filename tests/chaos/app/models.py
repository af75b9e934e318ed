from django.db import models


class Execution(models.Model):
    """One run of a chaos handler, written by the handler itself in autocommit.

    Outside the job's transaction, so it survives whatever happens to the
    job: the verdict's evidence of what ran, not what the worker reported.
    No unique (job, attempt): running an attempt twice is what the run looks for.
    """

    run_id = models.UUIDField(primary_key=True)
    job_id = models.UUIDField(db_index=True)
    attempt = models.PositiveIntegerField()
    worker_id = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    # Stamped when the handler returns or raises; empty if its process died first.
    finished_at = models.DateTimeField(null=True)
    outcome = models.CharField(max_length=8, blank=True, default="")


class StepEffect(models.Model):
    """One run of a durable step's body (``app/durable.py``): the step's side effect, written first.

    In autocommit, outside the step's record, as a payment or an e-mail would
    be: the verdict compares these with the step records (``tests/chaos/durable.py``).
    """

    job_id = models.UUIDField(db_index=True)
    step = models.CharField(max_length=64)
    attempt = models.PositiveIntegerField()
    pid = models.PositiveIntegerField()
    at = models.DateTimeField()
