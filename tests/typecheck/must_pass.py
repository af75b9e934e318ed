"""Calls a type checker must accept (tests/typecheck/check.py runs mypy on this file)."""

from __future__ import annotations

import datetime as dt

import django_ojs
from django_ojs import JobContext
from django_ojs.canvas import Signature
from django_ojs.models import Job


@django_ojs.job("email.send", queue="mail")
def send_email(ctx: JobContext, to: str, subject: str, urgent: bool = False) -> dict[str, str]:
    return {"to": to, "subject": subject}


@django_ojs.job("report.build")
def build_report(ctx, *parts):  # an unannotated handler takes anything
    return len(parts)


def calls() -> None:
    job: Job | None = send_email.enqueue("a@example.com", "Hi")
    send_email.enqueue("a@example.com", subject="Hi", urgent=True)
    send_email.using(queue="mail", priority=5, scheduled_at=dt.datetime.now(dt.UTC)).enqueue("a@example.com", "Hi")
    send_email.using(retry={"max_attempts": 5}, timeout=dt.timedelta(seconds=30)).enqueue("b@example.com", "Hi")
    build_report.enqueue(1, "two", [3])
    send_email.using(priority="high").enqueue("a@example.com", "Hi")
    send_email.using(priority=-100).enqueue("a@example.com", "Hi")
    step: Signature = send_email.s("a@example.com", "Hi")
    django_ojs.chain(step, send_email.s("b@example.com", subject="Hi", urgent=True), build_report.s(1, 2)).enqueue()
    send_email.using(queue="slow").s("c@example.com", "Hi").set(priority="low", timeout=30)
    django_ojs.enqueue("email.send", ["a@example.com", "Hi"], queue="mail")
    result: dict[str, str] = send_email(JobContext.__new__(JobContext), "a@example.com", "Hi")
    del job, result
