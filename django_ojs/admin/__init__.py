"""The operators' console in the Django admin.

Importing this package (Django's admin autodiscovery does) registers the
Jobs, Failed jobs, Workers, Workflows, Queues, Cron schedules, Rate limits, Overview and API keys pages on the
default admin site. Every action goes through the core; see each module.
"""

from . import cron, dead_letter, jobs, keys, overview, queues, rate_limits, workers, workflows

__all__ = ["cron", "dead_letter", "jobs", "keys", "overview", "queues", "rate_limits", "workers", "workflows"]
