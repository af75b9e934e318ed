"""Compose workflows in Python from handlers' signatures, and enqueue them.

::

    import django_ojs

    django_ojs.chain(fetch.s(url), parse.s(), store.s()).enqueue(name="import")
    (fetch.s(url) | parse.s() | store.s()).enqueue()
    django_ojs.group(resize.s(img, 64), resize.s(img, 256)).enqueue()
    django_ojs.batch(*(send.s(to) for to in users), on_complete=report.s()).enqueue()
    django_ojs.chain(extract.s(), django_ojs.group(csv.s(), pdf.s()), load.s()).enqueue()

A signature is a job not yet enqueued: its type, args and options (a
handler's ``@job`` options are its defaults, as for ``enqueue``). Unlike
Celery, a step's input does not change its args: every step gets the
results before it as ``ctx.parent_results`` (in step order) beside the args
it was given, so a signature reads the same wherever it is placed.

``enqueue()`` validates the whole tree exactly as ``POST /ojs/v1/workflows``
does and stores it with its first jobs in one transaction -- inside the
caller's ``transaction.atomic()`` it commits or rolls back with the
caller's rows. Enqueue middleware does not run for workflow jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .conf import ojs_settings
from .core import workflows as store
from .handlers.options import job_envelope
from .handlers.registry import registry
from .protocol.workflows import parse

if TYPE_CHECKING:
    from typing import Unpack

    from .handlers.options import EnqueueOptions
    from .models import Workflow


class Composable:
    """What can be a step: a signature or a nested chain, group or batch."""

    def definition(self) -> dict[str, Any]:
        raise NotImplementedError

    def __or__(self, other: Composable) -> Chain:
        """``a | b``: a chain; chains on either side are joined, not nested."""
        if not isinstance(other, Composable):
            return NotImplemented
        left = self.steps if isinstance(self, Chain) else (self,)
        right = other.steps if isinstance(other, Chain) else (other,)
        return Chain(tuple(left) + tuple(right))

    def enqueue(self, *, name: str = "") -> Workflow:
        """Validate and store the workflow; its first jobs are enqueued in the same transaction."""
        body = self.definition()
        if name:
            body["name"] = name
        return store.create(parse(body, max_jobs=ojs_settings.MAX_BATCH_SIZE, job_options=store.job_options()))


@dataclass(frozen=True)
class Signature(Composable):
    """One job to run: ``handler.s(*args)``, ``handler.using(**options).s(*args)`` or ``signature("type", [args], **options)``."""

    type: str
    args: tuple[Any, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)

    def set(self, **options: Unpack[EnqueueOptions]) -> Signature:
        """A copy with more options (``queue=``, ``retry=``, ``timeout=``...)."""
        return replace(self, options={**self.options, **options})

    def definition(self) -> dict[str, Any]:
        return job_envelope(self.type, list(self.args), {**registry.defaults(self.type), **self.options})

    def enqueue(self, *, name: str = "") -> Workflow:
        """A signature alone is a one-step chain; ``handler.enqueue()`` enqueues a plain job."""
        return Chain((self,)).enqueue(name=name)


@dataclass(frozen=True)
class Chain(Composable):
    steps: tuple[Composable, ...]

    def definition(self) -> dict[str, Any]:
        return {"type": "chain", "steps": [step.definition() for step in self.steps]}


@dataclass(frozen=True)
class Group(Composable):
    jobs: tuple[Composable, ...]

    def definition(self) -> dict[str, Any]:
        return {"type": "group", "jobs": [member.definition() for member in self.jobs]}


@dataclass(frozen=True)
class Batch(Composable):
    jobs: tuple[Composable, ...]
    callbacks: dict[str, Signature]

    def definition(self) -> dict[str, Any]:
        return {
            "type": "batch",
            "jobs": [member.definition() for member in self.jobs],
            "callbacks": {name: callback.definition() for name, callback in self.callbacks.items()},
        }


def signature(job_type: str, args: Sequence[Any] = (), **options: Any) -> Signature:
    return Signature(job_type, tuple(args), options)


def chain(*steps: Composable) -> Chain:
    """Steps run one after another; each gets every earlier result in ``ctx.parent_results``."""
    return Chain(_steps(steps))


def group(*jobs: Composable) -> Group:
    """Jobs run in parallel; the group fails if any of them fails, once all have ended."""
    return Group(_steps(jobs))


def batch(
    *jobs: Composable,
    on_complete: Signature | None = None,
    on_success: Signature | None = None,
    on_failure: Signature | None = None,
) -> Batch:
    """A group with callbacks, each enqueued at most once with every job's result."""
    callbacks = {
        name: callback
        for name, callback in (("on_complete", on_complete), ("on_success", on_success), ("on_failure", on_failure))
        if callback is not None
    }
    return Batch(_steps(jobs), callbacks)


def _steps(items: Sequence[Any]) -> tuple[Composable, ...]:
    # One iterable argument works too: group(send.s(to) for to in users) or group([...]).
    if len(items) == 1 and not isinstance(items[0], Composable):
        items = tuple(items[0])
    for item in items:
        if not isinstance(item, Composable):
            raise TypeError(f"workflow steps are signatures, chains, groups or batches, not {type(item).__name__}")
    return tuple(items)
