"""FETCH, ACK, FAIL (nack) and BEAT (ojs-http-binding §10), plus register/deregister.

The binding has no registration endpoint; ``/workers/register`` and
``/workers/deregister`` are this server's documented extensions for
ojs-worker-protocol §3 (a heartbeat from an unknown worker registers it too).
"""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from ..conf import ojs_settings
from ..core import settle, workers
from ..core.claim import fetch
from ..core.durable import steps_by_job
from ..core.turn import settle_and_fetch
from ..core.types import LimitReport, Settlement
from ..protocol.durations import format_timestamp
from ..protocol.envelope import render_job
from ..protocol.errors import OJSError
from ..protocol.states import JobState, WorkerState
from .base import AnsweringView, OJSView, Reply
from .errors import STATUS
from .media import admit_items
from .rate_limits import limit_headers
from .requests import (
    check_ack_count,
    parse_ack,
    parse_ack_batch,
    parse_carried_fetch,
    parse_fetch,
    parse_heartbeat,
    parse_nack,
    parse_worker_info,
    worker_id,
)


def rendered_claims(jobs: list[Any]) -> list[dict[str, Any]]:
    """Claimed jobs as FETCH answers them: a retry of a durable job carries the steps it recorded,
    so its worker skips them."""
    steps = steps_by_job(jobs)
    return [render_job(job, steps=steps.get(job.seq)) for job in jobs]


class FetchView(AnsweringView):
    """FETCH. Served by ``api/plain_views.py`` (POST) and by DRF (any other method: 405, OPTIONS)."""

    required_scope = "worker"

    def answer(self, body: dict[str, Any]) -> Reply:
        asked = parse_fetch(body, max_count=ojs_settings.MAX_FETCH_COUNT)
        report = LimitReport()
        jobs = fetch(
            asked.queues,
            count=asked.count,
            worker_id=asked.worker_id,
            visibility_timeout=asked.visibility_timeout,
            limit_report=report,
        )
        rendered = rendered_claims(jobs)
        reply: dict[str, Any] = {"jobs": rendered}
        if rendered:
            reply["job"] = rendered[0]
        return Reply(reply, 200, limit_headers(report))


class AckView(AnsweringView):
    """ACK. Served by ``api/plain_views.py`` (POST) and by DRF (any other method: 405, OPTIONS)."""

    required_scope = "worker"

    def answer(self, body: dict[str, Any]) -> Reply:
        ack = parse_ack(body)
        job = settle.ack(ack.job_id, result=ack.result, lease=ack.lease)
        rendered = render_job(job)
        return Reply(
            {
                "acknowledged": True,
                "id": rendered["id"],
                "job_id": rendered["id"],
                "state": job.state,
                "completed_at": rendered.get("completed_at"),
                "job": rendered,
            }
        )


class BatchAckView(AnsweringView):
    """This server's batch ACK (docs/reference/http/workers.md): many ACKs in one request.

    Each item is an ACK body, settled as a single ACK would be; an item whose
    attempt is no longer held is refused on its own, in its entry of
    ``results`` with the error a single ACK would have answered, and the
    others complete. A ``fetch`` (a FETCH body) claims the worker's next jobs
    after them, in the same transaction: one request and one commit per turn
    of an HTTP worker, as the in-process worker's turn (``core.turn``).
    Served by ``api/plain_views.py`` (POST), like ACK.
    """

    required_scope = "worker"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        # Read per request (a view is made for each), so a changed setting applies at once.
        self.max_body_bytes = ojs_settings.MAX_BATCH_BYTES

    def admit_body(self, data: Any) -> None:
        admit_items(data, "acks", lambda acks: check_ack_count(acks, ojs_settings.MAX_FETCH_COUNT))

    def answer(self, body: dict[str, Any]) -> Reply:
        asked = parse_carried_fetch(body, max_count=ojs_settings.MAX_FETCH_COUNT)
        acks = parse_ack_batch(body, max_acks=ojs_settings.MAX_FETCH_COUNT, may_be_empty=asked is not None)
        settlements = [Settlement(ack.job_id, ack.lease, result=ack.result) for ack in acks]
        if asked is None:
            outcomes = settle.ack_many(settlements)
        else:
            report = LimitReport()
            verdicts, jobs = settle_and_fetch(asked.worker_id, settlements, asked.queues, asked.count, report,
                                              visibility_timeout=asked.visibility_timeout)
            outcomes = settle.refusals(settlements, verdicts)
        results = [_ack_outcome(str(ack.job_id), refused) for ack, refused in zip(acks, outcomes)]
        refused_count = sum(1 for refused in outcomes if refused is not None)
        reply: dict[str, Any] = {"results": results, "acknowledged": len(results) - refused_count,
                                 "refused": refused_count}
        if asked is None:
            return Reply(reply)
        reply["jobs"] = rendered_claims(jobs)
        return Reply(reply, 200, limit_headers(report))


def _ack_outcome(job_id: str, refused: Exception | None) -> dict[str, Any]:
    """One entry of a batch ACK's ``results``: completed, or the error body a single ACK would have had."""
    if refused is None:
        return {"job_id": job_id, "acknowledged": True, "state": JobState.COMPLETED.value}
    assert isinstance(refused, OJSError)  # core.refusal's 404 or 409
    return {
        "job_id": job_id,
        "acknowledged": False,
        "status": STATUS.get(refused.code, 409),
        "error": {"code": refused.code, "message": refused.message, "retryable": refused.retryable,
                  "details": refused.details},
    }


class NackView(OJSView):
    required_scope = "worker"

    def post(self, request: Any) -> Response:
        nack = parse_nack(self.body())
        job = settle.fail(nack.job_id, nack.failure, lease=nack.lease, requeue=nack.requeue)
        rendered = render_job(job)
        body: dict[str, Any] = {
            "id": rendered["id"],
            "job_id": rendered["id"],
            "state": job.state,
            "attempt": job.attempt,
            "max_attempts": job.max_attempts,
            "job": rendered,
        }
        for name in ("next_attempt_at", "next_retry_at", "retry_delay_ms", "discarded_at", "completed_at",
                     "dead_letter"):
            if name in rendered and (name != "retry_delay_ms" or job.state == JobState.RETRYABLE):
                body[name] = rendered[name]
        return Response(body)


class HeartbeatView(OJSView):
    required_scope = "worker"

    def post(self, request: Any) -> Response:
        beat = parse_heartbeat(self.body())
        reply = workers.beat(
            beat.worker_id,
            state=beat.state,
            held=beat.held,
            visibility_timeout=beat.visibility_timeout,
            info=beat.info,
        )
        return Response(
            {
                "state": reply.directive,
                # openapi's `directive`: empty while the worker should keep running.
                "directive": "" if reply.directive == WorkerState.RUNNING else reply.directive,
                # Ids, each meaning the attempt the request named for it.
                "jobs_extended": [held.job_id for held in reply.jobs_extended],
                "jobs_cancelled": [held.job_id for held in reply.jobs_cancelled],
                "jobs_lost": [held.job_id for held in reply.jobs_lost],
                "server_time": format_timestamp(reply.server_time),
                "heartbeat_interval": ojs_settings.HEARTBEAT_INTERVAL,
                "heartbeat_timeout": ojs_settings.HEARTBEAT_TIMEOUT,
            }
        )


class RegisterView(OJSView):
    required_scope = "worker"

    def post(self, request: Any) -> Response:
        body = self.body()
        worker = workers.register(worker_id(body.get("worker_id"), required=True), parse_worker_info(body))
        return Response(
            {
                "ok": True,
                "worker_id": worker.id,
                "server_time": format_timestamp(worker.last_heartbeat_at),
                "heartbeat_interval": ojs_settings.HEARTBEAT_INTERVAL,
                "heartbeat_timeout": ojs_settings.HEARTBEAT_TIMEOUT,
                "visibility_timeout_default": ojs_settings.DEFAULT_VISIBILITY_TIMEOUT,
            }
        )


class DeregisterView(OJSView):
    required_scope = "worker"

    def post(self, request: Any) -> Response:
        found = workers.deregister(worker_id(self.body().get("worker_id"), required=True))
        return Response({"ok": True, "deregistered": found})
