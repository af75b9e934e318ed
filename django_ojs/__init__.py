"""django-ojs: an Open Job Spec server and Python worker for Django projects.

Public API::

    import django_ojs

    @django_ojs.job("email.send", queue="mail")
    def send_email(ctx, to, subject): ...

    django_ojs.enqueue("email.send", ["a@example.com", "Hi"])
    send_email.enqueue("a@example.com", "Hi")
    django_ojs.enqueue_many([{"type": "email.send", "args": [...]}, ...])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["enqueue", "enqueue_many", "job", "JobContext", "JobCancelled", "__version__"]

if TYPE_CHECKING:
    from .worker.context import JobCancelled, JobContext
    from .worker.registry import job


def enqueue(job_type: str, args: Any = (), **options: Any) -> Any:
    """Store one job; see ``django_ojs.producer.enqueue``."""
    from .producer import enqueue as _enqueue

    return _enqueue(job_type, args, **options)


def enqueue_many(jobs: Any) -> Any:
    """Store several jobs atomically; see ``django_ojs.producer.enqueue_many``."""
    from .producer import enqueue_many as _enqueue_many

    return _enqueue_many(jobs)


def __getattr__(name: str) -> Any:
    # Imported on first use so that `import django_ojs` stays free of Django
    # imports (settings may not be configured yet when it runs).
    if name == "job":
        from .worker.registry import job

        return job
    if name in ("JobContext", "JobCancelled"):
        from .worker import context

        return getattr(context, name)
    raise AttributeError(f"module 'django_ojs' has no attribute {name!r}")
