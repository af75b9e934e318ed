"""Periodic jobs declared in code: ``@job(..., cron=...)`` and ``OJS["CRON"]``, as cron registrations.

The reaper syncs them into the store when it starts
(``core.schedules.sync_from_code`` of ``registry.declared_schedules()``): new ones are added, changed ones
updated, and ones removed from the code deleted -- only those that came from
code; schedules registered over HTTP are left alone.

``OJS["CRON"]`` entries have the shape of the HTTP binding's cron
registration (``POST /ojs/v1/cron``)::

    OJS = {"CRON": [
        {"name": "reports.nightly", "cron": "0 3 * * *", "timezone": "Europe/Paris",
         "type": "report.build", "args": ["nightly"], "options": {"queue": "reports"}},
    ]}

and ``@django_ojs.job("report.hourly", cron="0 * * * *", timezone="UTC")``
declares one for its own type (name: the type, ``_`` written ``-``; the
handler's options are the job's; ``cron_args=[...]`` its args;
``cron_name``, ``overlap_policy``, ``description`` optional).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..protocol.cron_jobs import CronSpec, schedule_from_setting
from .options import wire_options

# The decorator's keywords that describe its schedule, not the jobs' defaults.
SCHEDULE_KEYWORDS = ("cron", "timezone", "cron_args", "cron_name", "overlap_policy", "description")


def schedule_from_handler(job_type: str, schedule: Mapping[str, Any], options: Mapping[str, Any]) -> CronSpec:
    """The schedule of ``@job(job_type, cron=..., ...)``: its jobs carry the handler's options."""
    top_level, job_options = wire_options(options)
    body = {
        "name": schedule.get("cron_name") or job_type.replace("_", "-"),
        "cron": schedule["cron"],
        "timezone": schedule.get("timezone") or "UTC",
        "type": job_type,
        "args": list(schedule.get("cron_args") or []),
        "options": job_options,
        **top_level,
        "overlap_policy": schedule.get("overlap_policy") or "skip",
        "description": schedule.get("description") or f"declared by the handler of {job_type}",
    }
    return schedule_from_setting(body)
