"""What the docs' fragments use but do not show: a project's model, an order, a tenant, handlers.

Hidden preludes (``<!-- sample: ... -->`` comments above a block) import from
here: ``from tests.docs.standins import *``. Each name stands for something the
reader's project has; none is django-ojs.
"""

from __future__ import annotations

import datetime as dt
import sys
import types
from typing import Any

from django.db import transaction
from django.utils import timezone

import django_ojs

__all__ = [
    "Order", "django_ojs", "dt", "handlers_module", "order", "pks", "tenant", "timezone", "tomorrow", "transaction",
    "url", "users",
]


class _Orders:
    def create(self, *args: Any, **kwargs: Any) -> Order:
        return Order()


class Order:
    """The project's own model: ``Order.objects.create(...)`` gives an order whose pk is 42."""

    objects = _Orders()
    pk = 42

    def save(self) -> None:
        pass


order = Order()
pks = [42, 43]
tenant = "acme"
url = "https://example.com/report.csv"
users = ["ada@example.com", "bob@example.com"]
tomorrow = timezone.now() + dt.timedelta(days=1)


def handlers_module(name: str, **types_by_function: str) -> dict[str, Any]:
    """A module ``name`` (``myapp.jobs``) whose functions are handlers of the given types, importable.

    Each handler returns its arguments. Returns the handlers by function name.
    """
    module = types.ModuleType(name)

    def handler_of(job_type: str, function: str) -> Any:
        def run(ctx: Any, *args: Any) -> list[Any]:
            return list(args)

        run.__name__ = run.__qualname__ = function
        # Named as a sample's own functions are, so that a sample may define one again (README's store).
        run.__module__ = "docs_sample"
        return django_ojs.job(job_type)(run)

    for function, job_type in types_by_function.items():
        setattr(module, function, handler_of(job_type, function))
    parent = name.rpartition(".")[0]
    if parent and parent not in sys.modules:
        sys.modules[parent] = types.ModuleType(parent)
    sys.modules[name] = module
    return {function: getattr(module, function) for function in types_by_function}
