"""django-ojs: an Open Job Spec server and Python worker for Django projects.

Public API::

    import django_ojs

    @django_ojs.job("email.send", queue="email")
    def send_email(ctx, to, subject): ...

    django_ojs.enqueue("email.send", ["a@example.com", "Hi"])
    send_email.enqueue("a@example.com", "Hi")
    django_ojs.enqueue_many([{"type": "email.send", "args": [...]}, ...])
    django_ojs.chain(fetch.s(url), parse.s(), store.s()).enqueue()   # workflows
    await django_ojs.aenqueue("email.send", ["a@example.com", "Hi"])   # async views
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

__all__ = [
    "DuplicateJob",
    "JobCancelled",
    "JobContext",
    "QueueFull",
    "SignalTimeout",
    "Snooze",
    "__version__",
    "aenqueue",
    "aenqueue_many",
    "batch",
    "chain",
    "enqueue",
    "enqueue_many",
    "group",
    "job",
    "signal",
    "signal_workflow",
    "signature",
]

if TYPE_CHECKING:
    from .canvas import batch, chain, group, signature
    from .errors import DuplicateJob, QueueFull
    from .handlers.context import JobCancelled, JobContext, SignalTimeout, Snooze
    from .handlers.registry import job


def enqueue(job_type: str, args: Any = (), **options: Any) -> Any:
    """Store one job; see ``django_ojs.producer.enqueue``."""
    from .producer import enqueue as _enqueue  # at call time: `import django_ojs` loads no Django

    return _enqueue(job_type, args, **options)


def enqueue_many(jobs: Any) -> Any:
    """Store several jobs atomically; see ``django_ojs.producer.enqueue_many``."""
    from .producer import enqueue_many as _enqueue_many  # at call time, as enqueue

    return _enqueue_many(jobs)


def signal(job_id: Any, name: str, payload: Any = None) -> Any:
    """Deliver signal ``name`` (with a JSON ``payload``) to a job; see ``django_ojs.core.waits.signal``.

    Stored on the job, and wakes it at once if it waits for that name;
    ``django_ojs.errors.InvalidTransition`` (409 on the wire) if the job is
    finished or already has a signal of that name.
    """
    from .core.waits import signal as _signal  # at call time, as enqueue

    return _signal(job_id, name, payload)


def signal_workflow(workflow_id: Any, name: str, payload: Any = None) -> Any:
    """Deliver signal ``name`` to every unfinished job of a workflow, and keep it for the steps not
    yet started; returns how many jobs got it (``django_ojs.core.waits.signal_workflow``)."""
    from .core.waits import signal_workflow as _signal_workflow  # at call time, as enqueue

    return _signal_workflow(workflow_id, name, payload)[1]


async def aenqueue(job_type: str, args: Any = (), **options: Any) -> Any:
    """``enqueue`` for async code (async views, ``async def`` handlers): ``await django_ojs.aenqueue(...)``.

    The store is written through Django's synchronous ORM in the thread
    ``sync_to_async`` keeps for database work, so the job shares the
    connection -- and a transaction opened there -- with the caller's other
    ``sync_to_async`` database calls.
    """
    from asgiref.sync import sync_to_async

    return await sync_to_async(enqueue)(job_type, args, **options)


async def aenqueue_many(jobs: Any) -> Any:
    """``enqueue_many`` for async code."""
    from asgiref.sync import sync_to_async

    return await sync_to_async(enqueue_many)(jobs)


def __getattr__(name: str) -> Any:
    # Imported on first use so that `import django_ojs` stays free of Django
    # imports (settings may not be configured yet when it runs).
    if name == "job":
        from .handlers.registry import job  # on first use, as every name below

        return job
    if name in ("JobContext", "JobCancelled", "Snooze", "SignalTimeout"):
        from .handlers import context  # on first use

        return getattr(context, name)
    if name in ("chain", "group", "batch", "signature"):
        from . import canvas  # on first use

        return getattr(canvas, name)
    if name in ("DuplicateJob", "QueueFull"):
        from . import errors  # on first use

        return getattr(errors, name)
    raise AttributeError(f"module 'django_ojs' has no attribute {name!r}")
