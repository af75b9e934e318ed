"""Signals are sent by the process that committed the move: the worker, the reaper."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import django_ojs
from django_ojs.models import Worker
from tests.helpers import ago
from tests.worker.conftest import PATIENCE, wait_until

pytestmark = pytest.mark.postgres


def test_worker_and_reaper_processes_send_their_own_events(worker, reaper, tmp_path):
    log = tmp_path / "signals.jsonl"
    env = {"OJS_PROBE_SIGNALS": str(log), "OJS_HEARTBEAT_TIMEOUT": "2"}
    process = worker("--concurrency", "2", env=env)
    jobs = [django_ojs.enqueue("probe.noop") for _ in range(5)]

    def lines() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def sent(kind: str) -> set[str]:
        return {line["job_id"] for line in lines() if line["type"] == kind}

    wait_until(lambda: sent("job.completed") == {str(j.id) for j in jobs}, PATIENCE, "completions signalled")
    by_worker = [line for line in lines() if line["pid"] == process.pid]
    assert Counter(line["type"] for line in by_worker if line["job_id"])["job.completed"] == 5
    # exactly once: no event id twice
    ids = [line["id"] for line in lines()]
    assert len(ids) == len(set(ids))
    # The reaper declares a silent worker dead, in its own process.
    Worker.objects.register("ghost")
    Worker.objects.filter(id="ghost").update(last_heartbeat_at=ago(seconds=60))
    reaping = reaper(env=env)
    wait_until(lambda: any(line["signal"] == "worker_died" and line["worker_id"] == "ghost" for line in lines()),
               PATIENCE, "worker_died from the reaper")
    died = [line for line in lines() if line["signal"] == "worker_died"]
    assert [line["pid"] for line in died] == [reaping.pid]
