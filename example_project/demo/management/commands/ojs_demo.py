"""manage.py ojs_demo: the whole system on one machine, with jobs flowing.

Migrates the database (SQLite by default), makes sure there is a superuser
for the admin and an API key for the HTTP API, then runs three child
processes -- the web server (gunicorn with the production configuration,
``example_project/gunicorn.conf.py``, on 127.0.0.1), ``ojs_reaper`` and
``ojs_worker`` -- and enqueues the sample jobs of ``demo/jobs.py``
every few seconds: greetings that succeed, payments that fail once and
succeed on their retry, and sleeps that keep a worker slot busy. It prints
where to look and a line of job counts every few seconds.

Ctrl+C (or SIGTERM) stops the enqueueing and sends each child one SIGTERM:
the worker finishes its running jobs (its graceful shutdown), then all
exit. The children run in their own sessions, so the terminal's Ctrl+C
reaches only this command and each child gets exactly one signal.

The API keeps its authentication on: the demo issues a key (scope admin)
and prints it, rather than opening the API to anyone on the machine.
"""

from __future__ import annotations

import itertools
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection
from django.db.models import Count

import django_ojs
from django_ojs.models import ApiKey, Job

NAMES = ["Ada", "Grace", "Linus", "Guido", "Barbara", "Ken", "Margaret", "Dennis"]
# The worker's grace period: long enough for the sample jobs (at most 4 s),
# short enough that Ctrl+C returns the terminal at once (tox.ini gives the
# demo 20 s before it sends SIGTERM).
GRACE_PERIOD = 5
STOP_TIMEOUT = GRACE_PERIOD + 10  # the grace period plus the worker's shutdown
# The configuration a deployment serves the API with (docs/how-to/serving.md).
GUNICORN_CONFIG = Path(__file__).resolve().parents[3] / "gunicorn.conf.py"
# A laptop's demo needs no more web processes than this, whatever its cores.
WEB_PROCESSES = 2


class Command(BaseCommand):
    help = "Run server, reaper and worker on this machine and enqueue sample jobs until Ctrl+C."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000, help="port of the web server (default 8000)")
        parser.add_argument("--every", type=float, default=2.0, help="seconds between batches of sample jobs")
        parser.add_argument("--duration", type=float, default=0,
                            help="stop by itself after this many seconds (default: run until Ctrl+C)")

    def handle(self, *args, **options):
        self.stopping = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: self.stopping.set())
        call_command("migrate", interactive=False, verbosity=0)
        login = self._superuser()
        key = ApiKey.objects.issue("ojs-demo", ["admin"])[1]
        children = self._start_children(options["port"])
        self._welcome(options["port"], login, key)
        try:
            self._enqueue_until_stopped(options["every"], options["duration"])
        finally:
            self._stop(children)

    def _superuser(self) -> str:
        users = get_user_model().objects
        existing = users.filter(is_superuser=True).first()
        if existing:
            return f"your superuser {existing.get_username()!r} (or: manage.py changepassword)"
        password = secrets.token_urlsafe(9)
        users.create_superuser("admin", "admin@example.com", password)
        return f"user 'admin', password {password!r} (created for the demo)"

    def _start_children(self, port: int) -> list[tuple[str, subprocess.Popen]]:
        manage = [sys.executable, str(Path(sys.argv[0]).resolve())]
        commands = {
            # The access log would bury the job counts under the admin's live refreshes.
            "server": [sys.executable, "-m", "gunicorn", "--config", str(GUNICORN_CONFIG),
                       "--chdir", str(GUNICORN_CONFIG.parents[1]), "--bind", f"127.0.0.1:{port}",
                       "--workers", str(WEB_PROCESSES),
                       "--access-logfile", os.devnull],
            "reaper": [*manage, "ojs_reaper"],
            "worker": [*manage, "ojs_worker", "--concurrency", "4", "--queue", "default",
                       "--grace-period", str(GRACE_PERIOD)],
        }
        # Own sessions: the terminal's Ctrl+C reaches only the demo, which then
        # sends each child exactly one SIGTERM (a second would force the worker).
        # No proxy in front of the demo's gunicorn: Django serves the admin's static files.
        env = {**os.environ, "SERVE_STATIC": "true"}
        return [(name, subprocess.Popen(argv, start_new_session=True, env=env)) for name, argv in commands.items()]

    def _welcome(self, port: int, login: str, key: str) -> None:
        base = f"http://127.0.0.1:{port}"
        self.stdout.write(self.style.SUCCESS("\ndjango-ojs demo: server, reaper and worker are starting."))
        self.stdout.write(f"""
  Database      {connection.vendor} ({connection.settings_dict['NAME']})
  Admin         {base}/admin/   log in as {login}
  HTTP API      {base}/ojs/v1/  API key (scope admin, shown once):
                  {key}
                curl -H "Authorization: Bearer {key}" {base}/ojs/v1/queues
  Sample jobs   demo.greet (succeeds), demo.flaky (fails once, then succeeds), demo.sleep (works a while)

Jobs are enqueued every few seconds; the worker's and the reaper's logs follow.
Ctrl+C stops everything cleanly (the worker first finishes what it is running).
""")

    def _enqueue_until_stopped(self, every: float, duration: float) -> None:
        deadline = time.monotonic() + duration if duration else None
        next_report = time.monotonic() + 5
        for tick in itertools.count():
            if self.stopping.is_set() or (deadline and time.monotonic() >= deadline):
                return
            jobs = [{"type": "demo.greet", "args": [random.choice(NAMES)]},
                    {"type": "demo.sleep", "args": [round(random.uniform(1, 4), 1)]}]
            if tick % 2 == 0:
                jobs.append({"type": "demo.flaky", "args": [1000 + tick]})
            django_ojs.enqueue_many(jobs)
            if time.monotonic() >= next_report:
                next_report = time.monotonic() + 5
                self._report()
            self.stopping.wait(every)

    def _report(self) -> None:
        counts = dict(Job.objects.values_list("state").annotate(n=Count("seq")).order_by())
        states = ("available", "active", "retryable", "completed", "discarded")
        self.stdout.write("jobs: " + ", ".join(f"{state} {counts.get(state, 0)}" for state in states))

    def _stop(self, children: list[tuple[str, subprocess.Popen]]) -> None:
        self.stdout.write("\nstopping: server, reaper and worker (the worker finishes its running jobs first)...")
        for _, child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for name, child in children:
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"{name} did not stop in time; killing it")
                child.kill()
                child.wait()
        self.stdout.write(self.style.SUCCESS("demo stopped."))
