"""Cron registration, listing and removal (ojs-http-binding §13, ojs-cron §8).

Both request shapes are accepted (``protocol/cron_jobs.py``); replies carry both spellings.
"""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from ..core import schedules
from ..keys import INSPECT
from ..models import CronJob
from ..protocol.cron_jobs import parse_cron_request, validate_cron_name
from ..protocol.durations import format_timestamp
from ..protocol.errors import NotFound
from .base import OJSView
from .pagination import page_of


def render_cron(cron: CronJob) -> dict[str, Any]:
    template = cron.job_template
    out: dict[str, Any] = {
        "name": cron.name,
        "expression": cron.expression,
        "cron": cron.expression,
        "timezone": cron.timezone,
        "job_template": template,
        "type": template.get("type"),
        "args": template.get("args", []),
        "options": template.get("options", {}),
        "overlap_policy": cron.overlap_policy,
        "enabled": cron.enabled,
        "status": "active" if cron.enabled else "disabled",
        # Declared in code: changed there only (a POST or DELETE of it is a 409).
        "from_code": cron.from_code,
        "description": cron.description or None,
        "last_run_at": format_timestamp(cron.last_run_at),
        "next_run_at": format_timestamp(cron.next_run_at),
        "run_count": cron.run_count,
        "created_at": format_timestamp(cron.created_at),
        "updated_at": format_timestamp(cron.updated_at),
    }
    if template.get("meta"):
        out["meta"] = template["meta"]
    if cron.last_job_id:
        out["last_job_id"] = str(cron.last_job_id)
    return out


class CronListView(OJSView):
    required_scope = {"GET": INSPECT, "POST": "admin"}

    def get(self, request: Any) -> Response:
        page = page_of(request.query_params)
        crons = CronJob.objects.order_by("name")
        enabled = request.query_params.get("enabled")
        if enabled in ("true", "false"):
            crons = crons.filter(enabled=enabled == "true")
        rows, has_more = page.slice(crons)
        rendered = [render_cron(cron) for cron in rows]
        return Response(
            {"crons": rendered, "cron_jobs": rendered, "count": len(rendered), "pagination": page.meta(has_more)}
        )

    def post(self, request: Any) -> Response:
        cron, created = schedules.register(parse_cron_request(self.body()))
        rendered = render_cron(cron)
        return Response({"cron": rendered, "cron_job": rendered}, status=201 if created else 200)


class CronView(OJSView):
    required_scope = {"GET": INSPECT, "DELETE": "admin"}

    def get(self, request: Any, name: str) -> Response:
        cron = CronJob.objects.filter(name=validate_cron_name(name)).first()
        if cron is None:
            raise NotFound(f"cron job {name!r} not found", details={"resource_type": "cron", "resource_id": name})
        rendered = render_cron(cron)
        return Response({"cron": rendered, "cron_job": rendered})

    def delete(self, request: Any, name: str) -> Response:
        cron = schedules.unregister(validate_cron_name(name))
        return Response({"deleted": True, "name": cron.name, "cron": render_cron(cron)})
