"""Checked from a directory outside the checkout (check.py): the checkers must find the installed package.

With setuptools' import-hook editable install, mypy said `Cannot find
implementation or library stub for module named "django_ojs"` here, and pyright
that the import could not be resolved; then nothing below was checked at all.
"""

from __future__ import annotations

import django_ojs
from django_ojs import JobContext


@django_ojs.job("email.send")
def send_email(ctx: JobContext, to: str) -> None: ...


send_email.enqueue(1)  # E: Argument 1 to "enqueue" of "JobHandler" has incompatible type "int"; expected "str"
