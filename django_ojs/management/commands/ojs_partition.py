"""manage.py ojs_partition: the job history's partitions on PostgreSQL (docs/how-to/history-partitions.md)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from ...core import partition_migration, partitions
from ...models import Job


class Command(BaseCommand):
    help = (
        "status: the job table's layout and its partitions with their rows. "
        "migrate: partition a plain job table online, in batches (resumable). "
        "abort: undo a migration not swapped yet (its trigger and copy go). "
        "drop-old: drop the plain table a migration left behind."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["status", "migrate", "abort", "drop-old"])
        parser.add_argument("--batch-size", type=int, default=5000, help="jobs copied per transaction (migrate)")
        parser.add_argument("--pause", type=float, default=0.0, help="seconds between two batches (migrate)")
        parser.add_argument("--max-batches", type=int, default=None,
                            help="stop after this many batches; the next run resumes (migrate)")
        parser.add_argument("--restart", action="store_true",
                            help="forget a migration in progress and copy from the start (migrate)")
        parser.add_argument("--drop-old", action="store_true", help="after the swap, drop the plain table (migrate)")

    def handle(self, *args, **options):
        if connection.vendor != "postgresql":
            raise CommandError("history partitions are for PostgreSQL; SQLite keeps one job table")
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        getattr(self, options["action"].replace("-", "_"))(options)

    def status(self, options):
        progress = partition_migration.progress()
        if not partitions.is_partitioned():
            self.stdout.write("job table: one plain table (not partitioned)")
            if progress is not None:
                self.stdout.write(f"migration: copied through seq {progress.copied_through} of "
                                  f"{progress.copy_until}, started {progress.started_at:%Y-%m-%d %H:%M:%S}")
            return
        self.stdout.write("job table: partitioned (live jobs apart, finished ones by day)")
        for row in partitions.status():
            self.stdout.write(f"  {row.name:<45} {row.rows:>12,}  {row.holds}")
        if partition_migration.left_behind():
            self.stdout.write(f"left behind: {partition_migration.OLD} (drop it with `ojs_partition drop-old`)")

    def migrate(self, options):
        if partitions.is_partitioned():
            self.stdout.write("the job table is partitioned already")
        else:
            began = time.monotonic()

            def report(progress: partition_migration.Progress) -> None:
                if options["verbosity"] >= 1:
                    self.stdout.write(f"copied through seq {progress.copied_through} of {progress.copy_until}")

            try:
                if options["restart"]:
                    partition_migration.restart()
                progress = partition_migration.run(
                    Job, batch_size=options["batch_size"], pause=options["pause"],
                    max_batches=options["max_batches"], report=report,
                )
            except partition_migration.MigrationError as exc:
                raise CommandError(str(exc)) from exc
            if progress.swapped_at is None:
                self.stdout.write(f"stopped after {options['max_batches']} batches; run again to resume")
                return
            self.stdout.write(f"swapped in the partitioned table after {time.monotonic() - began:.1f} s; "
                              f"the plain one is {partition_migration.OLD}")
        # A tree started by an older release lacks indexes added since: built now, online.
        built = partitions.build_history_indexes()
        if built:
            self.stdout.write(f"built the history indexes {', '.join(built)}")
        if options["drop_old"]:
            self.drop_old(options)

    def abort(self, options):
        if partitions.is_partitioned():
            raise CommandError("the job table is partitioned: nothing to abort (going back is `migrate django_ojs 0023`)")
        try:
            partition_migration.restart()
        except partition_migration.MigrationError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write("no migration in progress: the mirror trigger and the partial copy are gone")

    def drop_old(self, options):
        if partition_migration.drop_old():
            self.stdout.write(f"dropped {partition_migration.OLD}")
        else:
            self.stdout.write("no plain job table left behind")
