"""manage.py ojs_worker: run job handlers (see django_ojs.worker.runtime)."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from ...conf.checks import judge_worker_queues
from ...observe.logs import show_on_stderr
from ...worker.runtime import Runtime, WorkerConfig
from ..schema import require_migrated


class Command(BaseCommand):
    help = (
        "Run the handlers registered with @django_ojs.job. SIGTERM or SIGINT: stop fetching, finish "
        "running jobs within the grace period, then exit; again: stop at once. SIGTSTP: quiet; SIGCONT: resume."
    )

    def add_arguments(self, parser):
        parser.add_argument("-q", "--queue", action="append", dest="queues", metavar="QUEUE",
                            help="queue to fetch from, repeatable, highest priority first "
                                 "(default: OJS['WORKER_QUEUES'])")
        parser.add_argument("-c", "--concurrency", type=int,
                            help="jobs run at once (default: OJS['WORKER_CONCURRENCY'], 10)")
        parser.add_argument("--label", action="append", dest="labels", metavar="LABEL",
                            help="label shown with the worker, repeatable")
        parser.add_argument("--grace-period", type=float,
                            help="seconds to let running jobs finish after SIGTERM "
                                 "(default: OJS['SHUTDOWN_GRACE_PERIOD'], 30)")
        parser.add_argument("--heartbeat-interval", type=float,
                            help="seconds between heartbeats (default: OJS['HEARTBEAT_INTERVAL'], 5)")
        parser.add_argument("--poll-interval", type=float,
                            help="seconds between fetches of an idle worker without LISTEN "
                                 "(default: OJS['POLL_INTERVAL'])")
        parser.add_argument("--async", action="store_true", dest="async_mode",
                            help="run handlers as tasks on one event loop (for many I/O-bound async def "
                                 "handlers); plain handlers run in threads beside it")
        parser.add_argument("--health-port", type=int,
                            help="serve a readiness probe on this port (/readyz, /healthz, /livez)")
        parser.add_argument("--health-host", default="0.0.0.0",
                            help="address of the readiness probe (default: 0.0.0.0)")

    def check(self, *args, **kwargs):
        """Django's checks, without W004: this worker says itself which handlers' queues it does not read."""
        token = judge_worker_queues.set(False)
        try:
            return super().check(*args, **kwargs)
        finally:
            judge_worker_queues.reset(token)

    def handle(self, *args, **options):
        show_on_stderr()
        require_migrated("ojs_worker")
        try:
            config = WorkerConfig.from_settings(
                queues=tuple(options["queues"]) if options["queues"] else None,
                concurrency=options["concurrency"],
                labels=tuple(options["labels"]) if options["labels"] else None,
                grace_period=options["grace_period"],
                heartbeat_interval=options["heartbeat_interval"],
                poll_interval=options["poll_interval"],
                health_port=options["health_port"],
                health_host=options["health_host"],
                async_mode=options["async_mode"] or None,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        status = Runtime(config).run()
        if status:
            sys.exit(status)
