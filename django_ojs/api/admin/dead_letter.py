"""The dead letter (ojs-admin-api §11): list, stats, retry one or by filter, delete one, purge by filter.

The same jobs as ``/ojs/v1/dead-letter``: discarded jobs kept as dead letters,
no plain discard (core/dead_letter.py). A filter narrows them as the job list's
does (§7.1: ``queue``, ``type``, ``since``, ``until``, ``search``); a plain
discard is never selected, and ``/dead-letter/{id}`` answers 404 for it.
Moves by filter run in bounded batches through ``core/bulk.py``, as the bulk
moves of §8 do, with ``"confirm": true``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from rest_framework.response import Response

from ...core import control
from ...core.dead_letter import DEAD_LETTER
from ...core.selection import JobFilter
from ...core.stats import dead_letter_stats
from ...protocol.envelope import parse_job_ref, render_job
from ...protocol.errors import InvalidRequest
from ..dead_letter import delete_dead_letter, render_stats, shown_dead_letter
from .base import AdminView, confirmed, timestamp_param
from .bulk import run
from .filters import FIELDS, filter_from_body, filter_from_query
from .jobs import JOB_LIST_QUERY, job_page


def dead_letter_of(job_filter: JobFilter) -> JobFilter:
    """The filter, narrowed to the dead letter; a ``state`` other than discarded selects nothing, so it is refused."""
    if any(state != "discarded" for state in job_filter.states):
        raise InvalidRequest("every job in the dead letter is discarded: leave state out", field="state")
    return dataclasses.replace(job_filter, kept_as=DEAD_LETTER)


class DeadLetterListView(AdminView):
    """§11.1 list (``GET``), §11.3 purge by filter (``DELETE`` with ``older_than``, ``filter`` and ``confirm``)."""

    query = {"GET": JOB_LIST_QUERY}

    def get(self, request: Any) -> Response:
        params = request.query_params
        return Response(job_page(dead_letter_of(filter_from_query(params)), params))

    def delete(self, request: Any) -> Response:
        body = self.body()
        selection = _body_selection(body)
        confirmed(body)
        report = run(selection, "purge")
        return Response({**report, "purged_count": report["succeeded"]})


class DeadLetterStatsView(AdminView):
    """The figures of ``GET /ojs/v1/dead-letter/stats``, from the same core function, narrowed by the list's filter."""

    query = {"GET": FIELDS}

    def get(self, request: Any) -> Response:
        job_filter = dead_letter_of(filter_from_query(request.query_params))
        return Response(render_stats(dead_letter_stats(job_filter.selection())))


class DeadLetterBulkRetryView(AdminView):
    """``POST /admin/dead-letter/retry``: every dead letter the filter matches, back to available (``confirm``)."""

    def post(self, request: Any) -> Response:
        body = self.body()
        selection = _body_selection(body)
        confirmed(body)
        report = run(selection, "retry")
        return Response({**report, "retried": report["succeeded"]})


class DeadLetterJobView(AdminView):
    """One dead letter: ``GET`` it with its error history, ``DELETE`` it for good."""

    def get(self, request: Any, job_id: str) -> Response:
        return Response(shown_dead_letter(job_id))

    def delete(self, request: Any, job_id: str) -> Response:
        return Response({"deleted": True, "job_id": delete_dead_letter(job_id)})


class DeadLetterRetryView(AdminView):
    """§11.2: one dead letter back to ``available`` with fresh attempts, its error history kept."""

    def post(self, request: Any, job_id: str) -> Response:
        job = control.resurrect(parse_job_ref(job_id, "id"), dead_letter_only=True)
        return Response({"job": render_job(job)})


def _body_selection(body: Mapping[str, Any]) -> Any:
    """A move's jobs: the body's ``filter`` (or its fields beside ``confirm``) and ``older_than``, in the dead letter."""
    older_than = timestamp_param(body.get("older_than"), "older_than")
    job_filter = dataclasses.replace(filter_from_body(body, also=("older_than",)), finished_before=older_than)
    return dead_letter_of(job_filter).selection()
