"""Handlers the testing-helper tests run (registered on import, like an app's jobs.py)."""

from __future__ import annotations

import asyncio
import threading

from asgiref.sync import sync_to_async

import django_ojs
from django_ojs.models import Job

calls: list[tuple[str, list]] = []


class MailDown(Exception):
    pass


@django_ojs.job("tt.welcome", queue="email")
def welcome(ctx, address):
    calls.append(("tt.welcome", [address]))
    return {"sent_to": address, "attempt": ctx.attempt}


@django_ojs.job("tt.flaky", queue="email", retry={"max_attempts": 3, "initial_interval": "PT60S"})
def flaky(ctx, fail_times):
    calls.append(("tt.flaky", [fail_times]))
    if ctx.attempt <= fail_times:
        raise MailDown(f"attempt {ctx.attempt} failed")
    return {"attempt": ctx.attempt}


@django_ojs.job("tt.signup")
def signup(ctx, address):
    """Enqueues another job, as handlers do."""
    welcome.enqueue(address)


@django_ojs.job("tt.async_fetch")
async def async_fetch(ctx, n):
    await asyncio.sleep(0)
    return {"n": n, "async": True}


@django_ojs.job("tt.async_session")
async def async_session(ctx):
    """Database work of an async handler: the ORM's async methods and a durable step."""
    welcome = await Job.objects.filter(type="tt.welcome").acount()
    step = await ctx.arun_step("mark", _recorded)
    in_the_tests_thread = await sync_to_async(lambda: threading.current_thread() is threading.main_thread())()
    return {"welcome": welcome, "step": step, "in_the_tests_thread": in_the_tests_thread}


async def _recorded():
    return "recorded"


@django_ojs.job("tt.bad_result")
def bad_result(ctx):
    return {"not json": object()}


@django_ojs.job("tt.snooze_once")
def snooze_once(ctx):
    if ctx.snoozes < 1:
        raise django_ojs.Snooze(3600)
    return ctx.snoozes


@django_ojs.job("tt.approval")
def approval(ctx):
    return ctx.wait_for_signal("approved", 3600)


@django_ojs.job("tt.reports_twice", retry={"max_attempts": 1})
def reports_twice(ctx, fail):
    """Two reports within a second: the second is held back until the handler ends."""
    ctx.progress(0.25, {"phase": "load"})
    ctx.progress(0.5, message="uploading")
    if fail:
        raise MailDown("upload failed")
    return "uploaded"
