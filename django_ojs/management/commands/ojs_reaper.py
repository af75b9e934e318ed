"""manage.py ojs_reaper: keep time for the job store (see django_ojs.reaper)."""

from __future__ import annotations

import signal

from django.core.management.base import BaseCommand

from ...conf import ojs_settings
from ...observe.logs import show_on_stderr
from ...reaper import Reaper, default_loops
from ..schema import require_migrated


class Command(BaseCommand):
    help = (
        "Promote due scheduled and retryable jobs, requeue expired leases, fail timed-out jobs, "
        "recover dead workers' jobs, fire cron schedules and prune old jobs. Several may run at once."
    )

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=ojs_settings.REAPER_INTERVAL,
                            help="seconds between timekeeping passes (default: OJS['REAPER_INTERVAL'])")
        parser.add_argument("--cron-interval", type=float, default=ojs_settings.CRON_INTERVAL)
        parser.add_argument("--prune-interval", type=float, default=ojs_settings.PRUNE_INTERVAL)
        parser.add_argument("--once", action="store_true", help="run every loop once and exit")

    def handle(self, *args, **options):
        show_on_stderr()
        require_migrated("ojs_reaper")
        reaper = Reaper(default_loops(options["interval"], options["cron_interval"], options["prune_interval"]))
        if options["once"]:
            moved = reaper.tick()
            self.stdout.write(", ".join(f"{name} {count}" for name, count in moved.items()))
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, reaper.stop)
        reaper.run_forever()
