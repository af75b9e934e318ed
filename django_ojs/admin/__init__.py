"""The operators' console in the Django admin.

Importing this package (Django's admin autodiscovery does) registers the
Jobs, Dead letter, Workers, Queues and Overview pages on the default admin site. Every action goes through the core; see
each module.
"""

from . import dead_letter, jobs, overview, queues, workers

__all__ = ["dead_letter", "jobs", "overview", "queues", "workers"]
