"""Cron: registration (upsert) and firing each due schedule exactly once (ojs-cron).

Firing takes due cron rows with ``FOR UPDATE SKIP LOCKED`` and advances
``next_run_at`` in the same transaction as the job it enqueues: several
reapers never fire one occurrence twice, and a reaper that was paused fires
at most one catch-up occurrence (ojs-cron §7.3) before jumping to the next
future one.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from ..conf import ojs_settings
from ..models import CronJob, Job
from ..protocol.cron import CronError, parse_schedule, validate_timezone
from ..protocol.cron_jobs import CronSpec
from ..protocol.durations import format_timestamp
from ..protocol.envelope import JobSpec, parse_job
from ..protocol.errors import Conflict, NotFound, OJSError
from ..protocol.states import TERMINAL
from . import events, maintenance_mode
from .clock import TxNow, db_now
from .control import cancel
from .push import push

logger = logging.getLogger("django_ojs.cron")


def register(spec: CronSpec) -> tuple[CronJob, bool]:
    """Create or update a schedule by name (ojs-cron §8.1 upsert); True when created. A schedule
    declared in code is refused (``declared_in_code``)."""
    with transaction.atomic():
        now = db_now()
        fields = _fields(spec, now)
        declared_in_code(CronJob.objects.select_for_update().filter(name=spec.name).first(), "changed")
        cron, created = CronJob.objects.update_or_create(
            name=spec.name, defaults=fields, create_defaults={**fields, "created_at": now}
        )
    return cron, created


def declared_in_code(cron: CronJob | None, move: str) -> None:
    """Refuse to change a schedule declared in code (``OJS["CRON"]``, ``@job(cron=...)``) any other
    way: the next reaper's start would put the code's back (or delete it once the code drops it),
    and the change, answered as done, would be lost without a word."""
    if cron is not None and cron.from_code:
        raise Conflict(
            f"cron job {cron.name!r} is declared in code (OJS['CRON'] or @job(cron=...)): it is {move} there; "
            "a change made here would be undone at the next reaper start",
            details={"resource_type": "cron", "resource_id": cron.name, "from_code": True},
        )


def sync_from_code(specs: Sequence[CronSpec]) -> dict[str, list[str]]:
    """Make the schedules declared in code the store's: ``{"added", "changed", "removed", "unchanged"}``.

    Only rows marked ``from_code`` are changed or removed; an operator's enable or
    disable of one stands while the code declares the same ``enabled``; a code schedule
    whose name an HTTP registration took takes it over (and says so in
    the log). An unchanged schedule keeps its ``next_run_at``, so a
    reaper restart neither skips nor repeats an occurrence. Several
    reapers may start at once: the rows are locked in name order, and one
    that loses the race to create a row retries once, finding it locked.
    """
    for attempt in (1, 2):
        try:
            return _sync_from_code(specs)
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _sync_from_code(specs: Sequence[CronSpec]) -> dict[str, list[str]]:
    wanted = {spec.name: spec for spec in specs}
    outcome: dict[str, list[str]] = {"added": [], "changed": [], "removed": [], "unchanged": []}
    with transaction.atomic():
        rows = {
            cron.name: cron
            for cron in CronJob.objects.select_for_update()
            .filter(Q(from_code=True) | Q(name__in=list(wanted)))
            .order_by("name")
        }
        now = db_now()
        for name, spec in sorted(wanted.items()):
            row = rows.get(name)
            enabled = _enabled_after_sync(row, spec)
            if row is not None and row.from_code and _same(row, spec) and row.enabled == enabled:
                if row.declared_enabled != spec.enabled:
                    CronJob.objects.filter(name=name).update(declared_enabled=spec.enabled)
                outcome["unchanged"].append(name)
                continue
            if row is not None and not row.from_code:
                logger.warning("cron %s was registered over HTTP; the schedule declared in code replaces it", name)
            fields = {**_fields(spec, now, enabled=enabled), "declared_enabled": spec.enabled}
            if row is None:
                CronJob.objects.create(name=name, from_code=True, created_at=now, **fields)
                outcome["added"].append(name)
            else:
                CronJob.objects.filter(name=name).update(from_code=True, **fields)
                outcome["changed"].append(name)
        gone = sorted(name for name, row in rows.items() if row.from_code and name not in wanted)
        if gone:
            CronJob.objects.filter(name__in=gone, from_code=True).delete()
        outcome["removed"] = gone
    return outcome


def _enabled_after_sync(row: CronJob | None, spec: CronSpec) -> bool:
    """The code's ``enabled``, unless an operator switched the schedule since the code last
    declared the same: their enable or disable (the admin's) stands until the code's own
    ``enabled`` changes. A reaper start must not turn back on a schedule an operator
    stopped at 3 a.m."""
    if row is not None and row.from_code and row.declared_enabled == spec.enabled:
        return row.enabled
    return spec.enabled


def overridden_here(cron: CronJob) -> bool:
    """A schedule declared in code whose ``enabled`` an operator has set against the code's."""
    return cron.from_code and cron.declared_enabled is not None and cron.enabled != cron.declared_enabled


def unregister(name: str) -> CronJob:
    with transaction.atomic():
        cron = CronJob.objects.select_for_update().filter(name=name).first()
        if cron is None:
            raise NotFound(f"cron job {name!r} not found", details={"resource_type": "cron", "resource_id": name})
        declared_in_code(cron, "removed")
        # A queryset delete keeps the instance's name for the reply.
        CronJob.objects.filter(name=name).delete()
    return cron


def fire_due(limit: int) -> int:
    """Enqueue one job for every schedule whose time has come; return how many fired.

    Not in maintenance mode (ojs-admin-api §12.1): a schedule that came due
    meanwhile fires once when it ends, as after any pause of the reaper.
    """
    if maintenance_mode.current(fresh=True).enabled:
        return 0
    fired = 0
    with transaction.atomic():
        due = list(
            CronJob.objects.select_for_update(skip_locked=True)
            .filter(enabled=True, next_run_at__lte=TxNow())
            .annotate(db_now=TxNow())
            .order_by("next_run_at")[:limit]
        )
        for cron in due:
            fired += _fire(cron, cron.db_now)
    return fired


def set_enabled(name: str, enabled: bool) -> CronJob | None:
    """Enable (next run from now) or disable a schedule; None if it was already so or is gone.

    On a schedule declared in code too: the operator's switch outlives reaper restarts
    until the code's own ``enabled`` changes (``_enabled_after_sync``)."""
    with transaction.atomic():
        cron = CronJob.objects.select_for_update().filter(name=name).first()
        if cron is None or cron.enabled == enabled:
            return None
        now = db_now()
        cron.enabled = enabled
        cron.next_run_at = _next_run(cron.expression, cron.timezone, now, anchor=now) if enabled else None
        cron.updated_at = now
        cron.save(update_fields=["enabled", "next_run_at", "updated_at"])
        events.record([events.other_event("cron.enabled" if enabled else "cron.disabled", now, cron_name=name)])
    return cron


def fire_now(name: str) -> CronJob | None:
    """Run a schedule once now, outside its timetable (its overlap policy still applies);
    its next run stays as planned. None when nothing was enqueued."""
    with transaction.atomic():
        cron = CronJob.objects.select_for_update().filter(name=name).annotate(db_now=TxNow()).first()
        if cron is None:
            return None
        return cron if _fire(cron, cron.db_now, occurrence=cron.db_now) else None


def _fire(cron: CronJob, now: dt.datetime, *, occurrence: dt.datetime | None = None) -> int:
    """Enqueue the schedule's job for ``occurrence`` (its due time by default,
    which also moves ``next_run_at`` on)."""
    on_schedule = occurrence is None
    occurrence = cron.next_run_at if occurrence is None else occurrence
    assert occurrence is not None  # a due schedule has its next run
    open_jobs = Job.objects.filter(cron_name=cron.name).exclude(state__in=TERMINAL)
    enqueued = 0
    if cron.overlap_policy == "skip" and open_jobs.exists():
        events.record([events.other_event("cron.skipped", now, cron_name=cron.name,
                                          scheduled_at=format_timestamp(occurrence),
                                          reason="previous run has not finished")])
    else:
        if cron.overlap_policy == "cancel_previous":
            for job_id in open_jobs.values_list("id", flat=True):
                cancel(job_id)
        try:
            job = push(_job_spec(cron, occurrence))
        except OJSError as exc:
            # A template that no longer validates must not stop the other schedules.
            logger.error("cron %s could not enqueue its job: %s", cron.name, exc.message)
        else:
            cron.last_job_id = job.id
            cron.run_count += 1
            enqueued = 1
            events.record([events.other_event(
                "cron.triggered", now, queue=job.queue, cron_name=cron.name, cron_expr=cron.expression,
                job_type=job.type, job_id=str(job.id), scheduled_at=format_timestamp(occurrence))])
    cron.last_run_at = occurrence
    if on_schedule:
        cron.next_run_at = _next_run(cron.expression, cron.timezone, now, anchor=occurrence)
    cron.updated_at = now
    cron.save(update_fields=["last_run_at", "next_run_at", "run_count", "last_job_id", "updated_at"])
    return enqueued


def _job_spec(cron: CronJob, occurrence: dt.datetime) -> JobSpec:
    # The project's defaults, as for a job pushed over HTTP (api/jobs.py).
    spec = parse_job(
        cron.job_template,
        path="job_template.",
        default_queue=ojs_settings.DEFAULT_QUEUE,
        default_retry=ojs_settings.retry_policy(),
    )
    spec.cron_name = cron.name
    # ojs-cron §6.3: the triggered job names its schedule in its metadata.
    spec.meta = {**spec.meta, "cron_name": cron.name, "cron_triggered_at": format_timestamp(occurrence)}
    return spec


def _fields(spec: CronSpec, now: dt.datetime, *, enabled: bool | None = None) -> dict[str, Any]:
    """The row's columns for ``spec``; ``enabled`` when it is not the spec's (``_enabled_after_sync``)."""
    enabled = spec.enabled if enabled is None else enabled
    return {
        "expression": spec.expression,
        "timezone": spec.timezone,
        "job_template": spec.job_template,
        "overlap_policy": spec.overlap_policy,
        "enabled": enabled,
        "description": spec.description,
        "next_run_at": _next_run(spec.expression, spec.timezone, now, anchor=now) if enabled else None,
        "updated_at": now,
    }


def _same(row: CronJob, spec: CronSpec) -> bool:
    """Declared as ``spec``, ``enabled`` aside (``_enabled_after_sync`` decides it)."""
    return (
        row.expression == spec.expression
        and row.timezone == spec.timezone
        and row.job_template == spec.job_template
        and row.overlap_policy == spec.overlap_policy
        and row.description == spec.description
    )


def _next_run(expression: str, timezone: str, after: dt.datetime, *, anchor: dt.datetime) -> dt.datetime | None:
    try:
        return parse_schedule(expression).next_after(after, validate_timezone(timezone), anchor=anchor)
    except CronError as exc:
        logger.error("cron expression %r has no next run: %s", expression, exc)
        return None
