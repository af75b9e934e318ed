"""manage.py ojs SUBCOMMAND: list and inspect jobs, move them in bulk, pause queues, see workers.

Thin: arguments in, a read (``cli.reads``) or a core move (``core.bulk``,
``Queue.objects``) out, printed as a table or, with ``--json``, as JSON.

Exit codes: 0 done; 1 bad input or not found; 2 usage error; 3 not
confirmed (a bulk move without ``--yes`` where nobody can answer, or
answered no); 4 done in part (some matching jobs were skipped: see the
report, run again).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...cli import output, reads
from ...core import bulk, maintenance_mode, queues, waits
from ...core.dead_letter import KEPT_AS
from ...core.selection import JobFilter, job_uuid
from ...protocol.durations import parse_duration
from ...protocol.envelope import validate_queue_name
from ...protocol.errors import OJSError

NOT_CONFIRMED = 3
PARTIAL = 4
JOB_COLUMNS = ("id", "type", "queue", "state", "priority", "attempt", "created_at", "error_type", "kept")
JOB_TASK_COLUMNS = (*JOB_COLUMNS[:2], "task", *JOB_COLUMNS[2:])
QUEUE_COLUMNS = ("name", "paused", "counts", "unrunnable", "throughput", "oldest_available_age_seconds",
                 "estimated_drain_seconds", "limits")
WORKER_COLUMNS = (
    "id", "hostname", "pid", "queues", "state", "reported_state", "directive", "active_jobs", "overrun_handlers",
    "last_heartbeat_at",
)
BULK_HELP = {
    "retry": "retry failed (discarded) jobs, dead letters and plain discards: back to available with fresh attempts",
    "purge": "delete failed (discarded) jobs, dead letters and plain discards, with their history, for good",
    "delete": "delete finished jobs (completed, discarded, cancelled) and their error history for good",
    "cancel": "cancel unfinished jobs (active ones are told at their next heartbeat)",
    "discard": "discard waiting jobs (scheduled, available, pending, retryable)",
    "activate": "activate pending jobs",
}


class Command(BaseCommand):
    help = "Operate the job store: list and inspect jobs, bulk moves by filter, pause/resume queues, workers."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

        jobs = commands.add_parser("jobs", help="list jobs, newest first")
        _filters(jobs)
        jobs.add_argument("--limit", type=positive_int, default=50, help="most jobs listed (default 50)")
        _json(jobs)

        show = commands.add_parser("show", help="one job in full, with its error history")
        show.add_argument("job_id")
        _json(show)

        signal = commands.add_parser(
            "signal", help="deliver a signal to a job: stored on it, and the job woken if it waits for that name"
        )
        signal.add_argument("job_id")
        signal.add_argument("name", help="the signal's name, as the handler waits for it")
        signal.add_argument("--payload", default="null", help="a JSON value the handler's wait returns")
        _json(signal)
        wait = commands.add_parser("wait", help="wait for a job to end and print its result (exit 1 if it did not "
                                                 "complete or the timeout passed)")
        wait.add_argument("job_id")
        wait.add_argument("--timeout", type=float, default=None, help="seconds to wait at most (default: no limit)")
        _json(wait)

        workflow = commands.add_parser("workflow", help="a workflow and its jobs by state, added ones included")
        workflow.add_argument("workflow_id")
        _json(workflow)

        for name, text in BULK_HELP.items():
            move = commands.add_parser(name, help=text, description=text)
            _filters(move)
            move.add_argument("--all", action="store_true", help="no filter: every job the move can take")
            move.add_argument("--dry-run", action="store_true", help="count the matching jobs, move nothing")
            move.add_argument("--yes", action="store_true", help="proceed without asking")
            move.add_argument("--limit", type=positive_int, help="look at most at this many jobs")
            move.add_argument("--batch-size", type=positive_int, default=bulk.BATCH_SIZE,
                              help=f"jobs per transaction (default {bulk.BATCH_SIZE})")
            _json(move)

        for name, text in (("pause", "stop workers fetching from queues"), ("resume", "let workers fetch again")):
            queue = commands.add_parser(name, help=text)
            queue.add_argument("queues", nargs="+", metavar="QUEUE")
            _json(queue)

        maintenance = commands.add_parser(
            "maintenance", help="maintenance mode: show it, or turn it on or off (workers fetch nothing meanwhile)"
        )
        maintenance.add_argument("switch", nargs="?", choices=("on", "off"), help="omit to show the state")
        maintenance.add_argument("--reason", default="", help="why, shown by the admin, health and the admin API")
        maintenance.add_argument("--for", dest="duration", help="how long it is expected to last, e.g. PT30M")
        _json(maintenance)

        _json(commands.add_parser("queues", help="queues: paused or not, backlog and discarded counts, rates, oldest wait, time to drain, limits"))
        workers = commands.add_parser("workers", help="registered workers and their last heartbeat")
        workers.add_argument("--all", action="store_true", help="include workers declared dead")
        _json(workers)

    def handle(self, *args: Any, **options: Any) -> None:
        subcommand = options["subcommand"]
        try:
            if subcommand in BULK_HELP:
                self.bulk_move(subcommand, options)
            else:
                getattr(self, f"do_{subcommand}")(options)
        except OJSError as error:
            raise CommandError(error.message) from error

    # -- reads -------------------------------------------------------------------------

    def do_jobs(self, options: dict[str, Any]) -> None:
        rows = reads.list_jobs(_job_filter(options), options["limit"])
        # The task column where a listed job runs a Django @task: beside the type they all share.
        columns = JOB_TASK_COLUMNS if any(row["task"] for row in rows) else JOB_COLUMNS
        self.emit(options, rows, lambda: output.table(rows, columns))

    def do_show(self, options: dict[str, Any]) -> None:
        job = reads.show_job(options["job_id"])
        # People read what a discarded job is kept as in one line under it; scripts read dead_letter, kept_until.
        # And what a retry of a durable job resumes from (its steps, its last checkpoint), what it is
        # kept as, and what it waits for.
        lines = [line for line in (reads.durable_line(job), reads.kept_line(job), reads.waiting_line(job)) if line]
        self.emit(options, job, lambda: "\n".join([output.as_json(job), *lines]))

    def do_signal(self, options: dict[str, Any]) -> None:
        try:
            value = json.loads(options["payload"])
        except ValueError as exc:
            raise CommandError(f"--payload must be JSON: {exc}") from exc
        name = options["name"]
        job = waits.signal(job_uuid(options["job_id"]), name, value)
        body = {"job_id": str(job.id), "signal": name, "state": job.state}
        self.emit(options, body, lambda: f"signal {name} delivered to job {job.id}, which is {job.state}")

    def do_wait(self, options: dict[str, Any]) -> None:
        body = reads.result_of(options["job_id"], options["timeout"])
        self.emit(options, body, lambda: output.as_json(body))
        if body["state"] != "completed":
            raise CommandError(f"job {body['job_id']} ended {body['state']}")

    def do_workflow(self, options: dict[str, Any]) -> None:
        shown = reads.show_workflow(options["workflow_id"])
        counts = shown["jobs_by_state"]
        row = {**{key: shown[key] for key in ("id", "type", "state")}, "jobs": counts["total"],
               "ended": counts["ended"], "by_state": counts["by_state"]}
        self.emit(options, shown, lambda: output.table([row], ("id", "type", "state", "jobs", "ended", "by_state")))

    def do_queues(self, options: dict[str, Any]) -> None:
        rows = reads.list_queues()
        # In the table, the states with jobs ("completed≈120000" where estimated), "type=count" per
        # type no running worker can handle (or that none reads the queue); JSON has the oldest too.
        shown = [{**row, "counts": _counts_cell(row),
                  "unrunnable": "all: no live worker reads it" if row["no_live_worker"] else
                  {item["type"]: item["count"] for item in row["unrunnable"]}} for row in rows]
        self.emit(options, rows, lambda: output.table(shown, QUEUE_COLUMNS))

    def do_workers(self, options: dict[str, Any]) -> None:
        rows = reads.list_workers(include_dead=options["all"])
        self.emit(options, rows, lambda: output.table(rows, WORKER_COLUMNS))

    # -- moves -------------------------------------------------------------------------

    def do_pause(self, options: dict[str, Any]) -> None:
        self.set_paused(options, queues.pause)

    def do_resume(self, options: dict[str, Any]) -> None:
        self.set_paused(options, queues.resume)

    def set_paused(self, options: dict[str, Any], move: Any) -> None:
        names = [validate_queue_name(name, "queue") for name in options["queues"]]
        rows = [{"name": queue.name, "paused": queue.paused} for queue in map(move, names)]
        self.emit(options, rows, lambda: output.table(rows, ("name", "paused")))

    def do_maintenance(self, options: dict[str, Any]) -> None:
        if options["switch"] == "on":
            duration = None
            if options["duration"]:
                try:
                    duration = parse_duration(options["duration"])
                except ValueError as exc:
                    raise CommandError(f"--for {exc}") from None
            state = maintenance_mode.enter(options["reason"], duration)
        elif options["switch"] == "off":
            state = maintenance_mode.leave()
        else:
            state = maintenance_mode.current(fresh=True)
        shown = state.to_dict()
        self.emit(options, shown, lambda: output.table([shown], ("enabled", "reason", "enabled_at", "estimated_end")))

    def bulk_move(self, name: str, options: dict[str, Any]) -> None:
        job_filter = _job_filter(options)
        if job_filter.empty and not options["all"]:
            raise CommandError(
                f"give a filter (--state, --queue, --type, --task, --id, --error-type, --search) or --all to {name} every job"
            )
        selection = job_filter.selection()
        matched = bulk.movable(selection, name).count()
        if options["limit"] is not None:
            matched = min(matched, options["limit"])
        if options["dry_run"]:
            report = {"move": name, "matched": matched, "dry_run": True}
            self.emit(options, report, lambda: output.report_line(report, dry_run=True))
            return
        if not options["yes"] and matched:
            self.confirm(name, matched)
        progress = None if options["json"] else self.progress
        done = bulk.bulk_move(
            selection, name, batch_size=options["batch_size"], limit=options["limit"], on_batch=progress
        )
        report = {**done.to_dict(), "matched": matched}
        self.emit(options, report, lambda: output.report_line(report))
        if done.skipped_total:
            raise CommandError(f"{done.skipped_total} jobs skipped; run again to retry them", returncode=PARTIAL)

    def confirm(self, name: str, matched: int) -> None:
        question = f"{name} {matched} jobs?"
        if not sys.stdin.isatty():
            raise CommandError(f"{question} Not confirmed: pass --yes (or --dry-run to count)", returncode=NOT_CONFIRMED)
        answer = input(f"{question} [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            raise CommandError("not confirmed; nothing moved", returncode=NOT_CONFIRMED)

    def progress(self, report: bulk.BulkReport) -> None:
        if report.batches % 10 == 0:
            self.stderr.write(f"  {report.moved} moved, {report.skipped_total} skipped ({report.batches} batches)")

    # -- output ------------------------------------------------------------------------

    def emit(self, options: dict[str, Any], value: Any, text: Any) -> None:
        self.stdout.write(output.as_json(value) if options["json"] else output.for_terminal(text()))


def _filters(parser: Any) -> None:
    parser.add_argument("--state", action="append", default=[], help="repeatable")
    parser.add_argument("--queue", action="append", default=[], help="repeatable")
    parser.add_argument("--type", action="append", default=[],
                        help="repeatable; an exact job type, or a prefix ending in * (email.*)")
    parser.add_argument("--task", action="append", default=[],
                        help="repeatable; the dotted path of a Django @task function (its django.task jobs)")
    parser.add_argument("--id", action="append", default=[], help="repeatable; a job id")
    parser.add_argument("--error-type", action="append", default=[], help="repeatable; the last error's type")
    parser.add_argument("--search", default="", help="a search term as in the admin, e.g. args.user_id=42")
    parser.add_argument("--kept-as", choices=KEPT_AS, default="",
                        help="discarded jobs kept as dead letters, or plain discards")


def _json(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def _job_filter(options: dict[str, Any]) -> JobFilter:
    # A malformed queue name is bad input (exit 1, the admin API's 400 and its message), not a filter
    # that quietly matches nothing; checked here, every subcommand taking filters gets it.
    queues = [validate_queue_name(name, "queue") for name in options["queue"]]
    return JobFilter(
        states=options["state"], queues=queues, types=options["type"], tasks=options["task"], ids=options["id"],
        error_types=options["error_type"], search=options["search"], kept_as=options["kept_as"],
    )


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


def _counts_cell(queue: dict[str, Any]) -> str:
    """A queue's states with jobs, ``=`` an exact count and ``≈`` the planner's estimate, as the admin
    writes it."""
    estimated = set(queue["counts_estimated"])
    shown = [f"{state}{'≈' if state in estimated else '='}{n}" for state, n in queue["counts"].items() if n]
    return " ".join(shown) or "-"
