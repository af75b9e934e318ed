"""Cron registration, listing and removal (ojs-http-binding §13, ojs-cron §8).

Both request shapes are accepted: openapi's ``expression`` + ``job_template``
(what the conformance cases send) and the binding's and ojs-cron's ``cron`` +
flat ``type``/``args``/``options``. Replies carry both spellings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rest_framework.response import Response

from ..core.schedules import OVERLAP_ALIASES, OVERLAP_POLICIES, CronSpec, validate_cron, validate_template
from ..durations import format_timestamp
from ..errors import InvalidRequest
from ..models import CronJob
from .base import OJSView
from .pagination import page_of

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9\-\.]*")  # ojs-cron §2.2, with fullmatch()


def validate_cron_name(value: Any, where: str = "name") -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value) or len(value) > 255:
        raise InvalidRequest(
            f"{where} must be lowercase letters, digits, '-' and '.', starting with a letter or digit "
            "(at most 255 characters)",
            field=where,
        )
    return value


def parse_cron_request(body: Mapping[str, Any]) -> CronSpec:
    name = validate_cron_name(body.get("name"))
    expression = body.get("expression", body.get("cron"))
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidRequest("expression (or cron) must be a cron expression such as '0 9 * * *'",
                             field="expression")
    timezone = body.get("timezone", "UTC")
    validate_cron(expression, timezone)
    template = body.get("job_template")
    if template is None:
        template = {key: body[key] for key in ("type", "args", "meta", "options") if key in body}
    policy = body.get("overlap_policy", "skip")
    if isinstance(policy, str):
        policy = OVERLAP_ALIASES.get(policy, policy)
    if not isinstance(policy, str) or policy not in OVERLAP_POLICIES:
        raise InvalidRequest(
            f"overlap_policy must be one of {', '.join(sorted(OVERLAP_POLICIES))}", field="overlap_policy"
        )
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        raise InvalidRequest("enabled must be true or false", field="enabled")
    description = body.get("description") or ""
    if not isinstance(description, str):
        raise InvalidRequest("description must be a string", field="description")
    return CronSpec(
        name=name,
        expression=expression.strip(),
        timezone=timezone,
        job_template=validate_template(template),
        overlap_policy=policy,
        enabled=enabled,
        description=description,
    )


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
    required_scope = {"GET": "read", "POST": "admin"}

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
        cron, created = CronJob.objects.register(parse_cron_request(self.body()))
        rendered = render_cron(cron)
        return Response({"cron": rendered, "cron_job": rendered}, status=201 if created else 200)


class CronView(OJSView):
    required_scope = {"GET": "read", "DELETE": "admin"}

    def get(self, request: Any, name: str) -> Response:
        cron = CronJob.objects.filter(name=validate_cron_name(name)).first()
        if cron is None:
            from ..errors import NotFound

            raise NotFound(f"cron job {name!r} not found", details={"resource_type": "cron", "resource_id": name})
        rendered = render_cron(cron)
        return Response({"cron": rendered, "cron_job": rendered})

    def delete(self, request: Any, name: str) -> Response:
        cron = CronJob.objects.unregister(validate_cron_name(name))
        return Response({"deleted": True, "name": cron.name, "cron": render_cron(cron)})
