"""manage.py ojs_chaos_feed: enqueue a chaos run's planned jobs, spread over a number of seconds.

Batches go through ``django_ojs.enqueue_many`` (all or none). Through a
database outage a batch is retried until it is stored exactly once: its ids
are fixed before the first try, and a try whose commit may have happened
before the connection broke is checked by looking the ids up.
"""

from __future__ import annotations

import contextlib
import time

from django.core.management.base import BaseCommand
from django.db import InterfaceError, OperationalError, connection
from uuid6 import uuid7

import django_ojs
from django_ojs.models import Job

from ....plan import plan

RETRY_DELAY = 0.2


class Command(BaseCommand):
    help = "Enqueue the chaos plan's jobs for --seed, spread evenly over --seconds."

    def add_arguments(self, parser):
        parser.add_argument("--jobs", type=int, required=True)
        parser.add_argument("--seed", type=int, required=True)
        parser.add_argument("--seconds", type=float, required=True)
        parser.add_argument("--batch", type=int, default=50)

    def handle(self, *args, **options):
        planned = plan(options["jobs"], options["seed"])
        size = options["batch"]
        batches = [planned[start : start + size] for start in range(0, len(planned), size)]
        began = time.monotonic()
        every = options["seconds"] / max(len(batches), 1)
        for number, batch in enumerate(batches):
            pause = began + number * every - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            items = [{**job.enqueue_item(), "id": str(uuid7())} for job in batch]
            self._store(items)
        self.stdout.write(f"enqueued {len(planned)} jobs in {time.monotonic() - began:.1f}s")

    def _store(self, items: list[dict]) -> None:
        ids = [item["id"] for item in items]
        said = False
        while True:
            try:
                if not Job.objects.filter(id=ids[0]).exists():
                    django_ojs.enqueue_many(items)
                return
            except (OperationalError, InterfaceError) as exc:
                if not said:
                    self.stderr.write(f"enqueue failed ({exc}); retrying until the database answers")
                    said = True
                with contextlib.suppress(Exception):  # the connection is broken already
                    connection.close()
                time.sleep(RETRY_DELAY)
