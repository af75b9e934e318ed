"""Calls a type checker must reject: each marked line (an "E:" comment) must get an error.

tests/typecheck/check.py runs mypy and pyright on this file and fails unless
both report every marked line (mypy with the marked text), and nothing else.
"""

from __future__ import annotations

import django_ojs
from django_ojs import JobContext


@django_ojs.job("email.send", queue="mail")
def send_email(ctx: JobContext, to: str, subject: str) -> None: ...


def calls() -> None:
    send_email.enqueue("a@example.com", 42)  # E: Argument 2 to "enqueue" of "JobHandler" has incompatible type "int"; expected "str"
    send_email.enqueue("a@example.com")  # E: Missing positional argument "subject" in call to "enqueue" of "JobHandler"
    send_email.enqueue("a@example.com", "Hi", "extra")  # E: Too many arguments for "enqueue" of "JobHandler"
    send_email.enqueue("a@example.com", subjet="Hi")  # E: Unexpected keyword argument "subjet" for "enqueue" of "JobHandler"
    send_email.using(queue=3).enqueue("a@example.com", "Hi")  # E: Argument "queue" to "using" of "JobHandler" has incompatible type "int"; expected "str"
    send_email.using(priorty=1)  # E: Unexpected keyword argument "priorty" for "using" of "JobHandler"
    send_email.using(queue="mail").enqueue(to=1, subject="Hi")  # E: Argument "to" to "enqueue" of "BoundJob" has incompatible type "int"; expected "str"
    # Priority is an integer (-100 to 100) or one of the named levels.
    send_email.using(priority="urgent")  # E: Argument "priority" to "using" of "JobHandler" has incompatible type
    # Workflow steps are checked against the handler as enqueue is.
    send_email.s("a@example.com", 42)  # E: Argument 2 to "s" of "JobHandler" has incompatible type "int"; expected "str"
    send_email.s("a@example.com")  # E: Missing positional argument "subject" in call to "s" of "JobHandler"
    send_email.using(queue="mail").s(1, "Hi")  # E: Argument 1 to "s" of "BoundJob" has incompatible type "int"; expected "str"
    send_email.s("a@example.com", "Hi").set(priority="urgent")  # E: Argument "priority" to "set" of "Signature" has incompatible type
