"""Calls a type checker must reject: each marked line (an "E:" comment) must get an error containing its text.

tests/typecheck/check.py runs mypy on this file and fails unless every marked
line is reported, and nothing else is.
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
