"""The operators' console in the Django admin.

Importing this package (Django's admin autodiscovery does) registers the
Jobs, Dead letter, Workers, Queues, Overview and API keys pages on the
default admin site. Every action goes through the core; see each module.
"""

from . import dead_letter, jobs, keys, overview, queues, workers

__all__ = ["dead_letter", "jobs", "keys", "overview", "queues", "workers"]
