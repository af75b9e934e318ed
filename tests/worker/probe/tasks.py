"""Django tasks (Django >= 6.0 only) run by ojs_worker in the tests."""

from django.tasks import task


class TaskFailure(Exception):
    pass


@task
def add(a: int, b: int) -> int:
    return a + b


@task(priority=5, queue_name="default")
def fail(message: str) -> None:
    raise TaskFailure(message)


@task(takes_context=True)
def which_attempt(context, label: str) -> dict:
    return {"label": label, "attempt": context.attempt}
