from django.db import models


class Execution(models.Model):
    """One run of a probe handler: inserted when it starts, stamped when it returns."""

    job_id = models.UUIDField()
    attempt = models.PositiveIntegerField()
    worker_id = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job_id", "attempt"], name="probe_one_run_per_attempt")]


class Order(models.Model):
    """An application row for the transactional-enqueue test."""

    reference = models.CharField(max_length=50)
