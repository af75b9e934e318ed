"""Validation of the worker endpoints' request bodies (pure).

Every bad field is an ``InvalidRequest`` naming it; nothing reaches the core
unchecked.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.types import HeldJob, Lease, WorkerInfo
from ..protocol.durations import parse_timestamp
from ..protocol.envelope import parse_job_ref, validate_queue_name
from ..protocol.errors import InvalidRequest
from ..protocol.failure import Failure, parse_failure
from ..protocol.states import WorkerState
from ..protocol.waits import delay, signal_name

MAX_WORKER_ID = 255
MAX_ACTIVE_JOBS = 10_000
# A FETCH names at most this many queues (it costs one index probe each).
MAX_FETCH_QUEUES = 1_000
MAX_VISIBILITY_MS = 365 * 86400 * 1000
# Worker.pid and Worker.concurrency are 32-bit columns on PostgreSQL.
MAX_STORED_INT = 2**31 - 1


@dataclass(frozen=True)
class FetchRequest:
    queues: list[str]
    count: int
    worker_id: str | None
    visibility_timeout: dt.timedelta | None


@dataclass(frozen=True)
class Completion:
    job_id: uuid.UUID
    lease: Lease
    result: Any = None
    failure: Failure | None = None
    requeue: bool = False


@dataclass(frozen=True)
class Heartbeat:
    worker_id: str
    state: WorkerState | None
    held: list[HeldJob]
    visibility_timeout: dt.timedelta | None
    info: WorkerInfo


def parse_fetch(body: Mapping[str, Any], *, max_count: int) -> FetchRequest:
    queues = body.get("queues")
    if isinstance(queues, str):
        queues = [queues]
    if not isinstance(queues, list) or not queues:
        raise InvalidRequest("queues must be a non-empty array of queue names", field="queues")
    if len(queues) > MAX_FETCH_QUEUES:
        raise InvalidRequest(f"at most {MAX_FETCH_QUEUES} queues per FETCH", field="queues")
    names = [validate_queue_name(name, f"queues[{index}]") for index, name in enumerate(queues)]
    count = body.get("count", 1)
    if not _is_int(count) or not 1 <= count <= max_count:
        raise InvalidRequest(f"count must be an integer from 1 to {max_count}", field="count")
    return FetchRequest(
        queues=names,
        count=count,
        worker_id=worker_id(body.get("worker_id"), required=False),
        visibility_timeout=visibility(body),
    )


def parse_ack(body: Mapping[str, Any]) -> Completion:
    return Completion(job_id=_job_id(body), lease=_lease(body), result=body.get("result"))


def parse_ack_batch(body: Mapping[str, Any], *, max_acks: int, may_be_empty: bool = False) -> list[Completion]:
    """A batch ACK's ``acks``: each item an ACK body, checked as ``parse_ack`` checks one.

    A malformed item refuses the whole request (its fields named ``acks[i].<field>``, its
    index in ``details.index``): the client has a bug to fix, not an attempt to settle.
    ``may_be_empty``: the batch carries a FETCH, which may come with nothing to acknowledge.
    """
    acks = body.get("acks")
    if not isinstance(acks, list) or not (acks or may_be_empty):
        raise InvalidRequest("acks must be a non-empty array of ACK bodies", field="acks")
    check_ack_count(acks, max_acks)
    completions = []
    for index, item in enumerate(acks):
        if not isinstance(item, dict):
            raise InvalidRequest(f"acks[{index}] must be a JSON object", field=f"acks[{index}]",
                                 details={"index": index})
        try:
            completions.append(parse_ack(item))
        except InvalidRequest as exc:
            exc.details["field"] = f"acks[{index}].{exc.details.get('field')}"
            exc.details["index"] = index
            exc.message = f"acks[{index}]: {exc.message}"
            raise
    return completions


def parse_carried_fetch(body: Mapping[str, Any], *, max_count: int) -> FetchRequest | None:
    """A batch ACK's ``fetch``, a FETCH body checked as ``parse_fetch`` checks one; None when absent.

    Its faults name their field inside it (``fetch.queues``), and refuse the whole request.
    """
    if "fetch" not in body:
        return None
    carried = body["fetch"]
    if not isinstance(carried, dict):
        raise InvalidRequest("fetch must be a FETCH body (a JSON object)", field="fetch")
    try:
        return parse_fetch(carried, max_count=max_count)
    except InvalidRequest as exc:
        exc.details["field"] = f"fetch.{exc.details.get('field')}"
        exc.message = f"fetch: {exc.message}"
        raise


def check_ack_count(acks: list[Any], max_acks: int) -> None:
    if len(acks) > max_acks:
        raise InvalidRequest(
            f"a batch ACK holds at most {max_acks} acks; this one has {len(acks)}",
            field="acks",
            details={"max_acks": max_acks, "count": len(acks)},
        )


def parse_nack(body: Mapping[str, Any]) -> Completion:
    requeue = body.get("requeue", False)
    if not isinstance(requeue, bool):
        raise InvalidRequest("requeue must be true or false", field="requeue")
    return Completion(
        job_id=_job_id(body),
        lease=_lease(body),
        failure=parse_failure(_required(body, "error")),
        requeue=requeue,
    )


@dataclass(frozen=True)
class Parking:
    """A snooze (``signal`` None) or a wait for a signal, on the attempt's lease."""

    job_id: uuid.UUID
    lease: Lease
    delay: dt.timedelta
    signal: str | None = None


def parse_snooze(body: Mapping[str, Any]) -> Parking:
    return Parking(_job_id(body), _held_lease(body), delay(_required(body, "delay"), field="delay"))


def parse_wait(body: Mapping[str, Any]) -> Parking:
    return Parking(
        _job_id(body), _held_lease(body), delay(_required(body, "timeout"), field="timeout"),
        signal_name(_required(body, "signal"), field="signal"),
    )


def _held_lease(body: Mapping[str, Any]) -> Lease:
    """A snooze or a wait names its attempt: it puts back only the attempt that sent it."""
    _required(body, "attempt")
    return _lease(body)


def parse_heartbeat(body: Mapping[str, Any]) -> Heartbeat:
    state = body.get("state")
    if state is not None and (not isinstance(state, str) or state not in WorkerState._value2member_map_):
        raise InvalidRequest("state must be 'running', 'quiet' or 'terminate'", field="state")
    # The binding's `active_jobs` is an array of ids; the worker protocol's
    # is a count beside `active_job_ids` (docs/explanation/decisions.md). An
    # entry may also name the attempt it holds: {"job_id": ..., "attempt": n}.
    entries: list[Any] = []
    for name in ("active_job_ids", "active_jobs"):
        value = body.get(name)
        if isinstance(value, list):
            entries.extend(value)
        elif value is not None and not (name == "active_jobs" and _is_int(value) and value >= 0):
            counted = " or a count of at least 0" if name == "active_jobs" else ""
            raise InvalidRequest(f"{name} must be an array of job ids{counted}", field=name)
    if body.get("job_id") is not None:
        entries.append(body["job_id"])
    if len(entries) > MAX_ACTIVE_JOBS:
        raise InvalidRequest(f"at most {MAX_ACTIVE_JOBS} active job ids per heartbeat", field="active_jobs")
    held = [_held_job(entry, f"active_jobs[{index}]") for index, entry in enumerate(entries)]
    return Heartbeat(
        worker_id=worker_id(body.get("worker_id"), required=True),
        state=WorkerState(state) if state else None,
        held=list(dict.fromkeys(held)),
        visibility_timeout=visibility(body),
        info=parse_worker_info(body),
    )


def _held_job(entry: Any, where: str) -> HeldJob:
    """A heartbeat's job: an id, or ``{"job_id"|"id": ..., "attempt": n}``."""
    if not isinstance(entry, Mapping):
        return HeldJob(str(parse_job_ref(entry, where)))
    attempt = entry.get("attempt")
    if attempt is not None and (not _is_int(attempt) or attempt < 1):
        raise InvalidRequest("attempt must be a positive integer", field=f"{where}.attempt")
    return HeldJob(str(parse_job_ref(entry.get("job_id", entry.get("id")), f"{where}.job_id")), attempt)


def parse_worker_info(body: Mapping[str, Any]) -> WorkerInfo:
    hostname = body.get("hostname")
    if hostname is not None and (not isinstance(hostname, str) or len(hostname) > 255):
        raise InvalidRequest("hostname must be a string of at most 255 characters", field="hostname")
    pid = body.get("pid")
    if pid is not None and (not _is_int(pid) or not 0 <= pid <= MAX_STORED_INT):
        raise InvalidRequest(f"pid must be an integer from 0 to {MAX_STORED_INT}", field="pid")
    concurrency = body.get("concurrency")
    if concurrency is not None and (not _is_int(concurrency) or not 1 <= concurrency <= MAX_STORED_INT):
        raise InvalidRequest(f"concurrency must be an integer from 1 to {MAX_STORED_INT}", field="concurrency")
    queues = body.get("queues")
    if queues is not None:
        if not isinstance(queues, list):
            raise InvalidRequest("queues must be an array of queue names", field="queues")
        queues = [validate_queue_name(name, f"queues[{i}]") for i, name in enumerate(queues)]
    labels = body.get("labels")
    if labels is not None and (not isinstance(labels, list) or not all(isinstance(x, str) for x in labels)):
        raise InvalidRequest("labels must be an array of strings", field="labels")
    started_at = body.get("started_at")
    if started_at is not None:
        try:
            started_at = parse_timestamp(started_at, allow_relative=False)
        except ValueError as exc:
            raise InvalidRequest(f"started_at: {exc}", field="started_at") from None
    return WorkerInfo(
        hostname=hostname, pid=pid, queues=queues, concurrency=concurrency, labels=labels, started_at=started_at
    )


def worker_id(value: Any, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise InvalidRequest("worker_id is required", field="worker_id")
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_WORKER_ID:
        raise InvalidRequest(
            f"worker_id must be a non-empty string of at most {MAX_WORKER_ID} characters", field="worker_id"
        )
    return value


def visibility(body: Mapping[str, Any]) -> dt.timedelta | None:
    value = body.get("visibility_timeout_ms")
    if value is None:
        return None
    if not _is_int(value) or not 0 < value <= MAX_VISIBILITY_MS:
        raise InvalidRequest(
            "visibility_timeout_ms must be a positive integer of milliseconds up to a year",
            field="visibility_timeout_ms",
        )
    return dt.timedelta(milliseconds=value)


def _job_id(body: Mapping[str, Any]) -> uuid.UUID:
    value = body.get("job_id", body.get("id"))
    if value is None:
        raise InvalidRequest("job_id is required", field="job_id")
    return parse_job_ref(value, "job_id")


def _required(body: Mapping[str, Any], name: str) -> Any:
    if body.get(name) is None:
        raise InvalidRequest(f"{name} is required", field=name)
    return body[name]


def _lease(body: Mapping[str, Any]) -> Lease:
    return Lease(worker_id=worker_id(body.get("worker_id"), required=False), attempt=lease_attempt(body))


def lease_attempt(body: Mapping[str, Any], *, required: bool = False) -> int | None:
    """The ``attempt`` a body names (its lease, with ``worker_id``); None if it names none."""
    attempt = body.get("attempt")
    if attempt is None and required:
        raise InvalidRequest("attempt is required: the record belongs to the attempt that holds the job",
                             field="attempt")
    if attempt is not None and (not _is_int(attempt) or attempt < 1):
        raise InvalidRequest("attempt must be a positive integer", field="attempt")
    return attempt


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
