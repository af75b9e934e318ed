"""manage.py ojs_chaos_signal: send the chaos plan's waiters their signal, each at its planned time.

A waiter planned "early" gets it as soon as its job exists -- often before
its handler parks it, so its wait finds it at once; "late" ``seconds``
after the job was enqueued, usually while it is parked; "never" not at all
(its wait times out). Through a database outage a send is retried; a send
whose commit may have happened before the connection broke is answered
409 the second time (the first of a name is kept), which is success here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time

from django.core.management.base import BaseCommand
from django.db import InterfaceError, OperationalError, connection
from django.db.models.fields.json import KT

import django_ojs
from django_ojs.errors import InvalidTransition
from django_ojs.models import Job

from ....plan import QUEUE, SIGNAL, plan, waiter_payload

POLL = 0.2


class Command(BaseCommand):
    help = "Send the chaos plan's waiters for --seed their signal, early, late or never as planned."

    def add_arguments(self, parser):
        parser.add_argument("--jobs", type=int, required=True)
        parser.add_argument("--seed", type=int, required=True)

    def handle(self, *args, **options):
        waiting = {job.index: job for job in plan(options["jobs"], options["seed"])
                   if job.kind == "waiter" and job.mode != "never"}
        sent = 0
        while waiting:
            for job_id, index, created_at in self._enqueued(list(waiting)):
                planned = waiting[index]
                delay = 0.0 if planned.mode == "early" else planned.seconds
                if dt.datetime.now(dt.UTC) >= created_at + dt.timedelta(seconds=delay):
                    self._send(job_id, index)
                    del waiting[index]
                    sent += 1
            time.sleep(POLL)
        self.stdout.write(f"sent {sent} signals")

    def _enqueued(self, indexes: list[int]) -> list[tuple]:
        """(id, index, created_at) of the planned waiters enqueued so far."""
        while True:
            try:
                rows = (
                    Job.objects.filter(queue=QUEUE, type="chaos.waiter")
                    .annotate(index=KT("args__1"))
                    .filter(index__in=[str(index) for index in indexes])
                    .values_list("id", "index", "created_at")
                )
                return [(job_id, int(index), created_at) for job_id, index, created_at in rows]
            except (OperationalError, InterfaceError):
                self._reconnect()

    def _send(self, job_id, index: int) -> None:
        while True:
            try:
                django_ojs.signal(job_id, SIGNAL, waiter_payload(index))
                return
            except InvalidTransition as refused:
                # Sent already (a commit whose reply the outage lost): the first is kept.
                if "already has signal" in refused.message:
                    return
                raise
            except (OperationalError, InterfaceError):
                self._reconnect()

    def _reconnect(self) -> None:
        with contextlib.suppress(Exception):  # the connection is broken already
            connection.close()
        time.sleep(POLL)
