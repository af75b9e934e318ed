"""Worker.objects.reap_dead: workers silent past HEARTBEAT_TIMEOUT (ojs-worker-protocol §10)."""

from __future__ import annotations

import pytest

from django_ojs.models import Event, Job, Worker
from tests.helpers import ago, history, holding, reload, update

TIMEOUT = 30  # the default HEARTBEAT_TIMEOUT


def silent_for(worker_id: str, seconds: float) -> None:
    Worker.objects.filter(id=worker_id).update(last_heartbeat_at=ago(seconds=seconds))


def test_a_silent_worker_is_declared_dead_and_its_jobs_recovered_at_once(claim):
    Worker.objects.register("dead")
    jobs = [claim("dead", options={"retry": {"max_attempts": 3}}) for _ in range(2)]
    silent_for("dead", TIMEOUT + 1)
    assert Worker.objects.reap_dead(10) == 2
    # The row stays, marked dead, so a worker that was only frozen is recognised if it comes back.
    assert Worker.objects.get(id="dead").declared_dead_at is not None
    for job in jobs:
        stored = reload(job)
        assert (stored.state, stored.attempt, stored.worker_id) == ("available", 1, None)
        assert stored.error["type"] == "worker_death"
        assert history(stored) == [(1, "worker_death")]
    assert Event.objects.filter(type="worker.stopped", extra__reason="dead").count() == 1


def test_a_worker_within_the_heartbeat_timeout_is_alive(claim):
    Worker.objects.register("alive")
    job = claim("alive")
    silent_for("alive", TIMEOUT - 5)
    assert Worker.objects.reap_dead(10) == 0
    assert Worker.objects.get(id="alive").declared_dead_at is None
    assert reload(job).state == "active"


def test_the_heartbeat_timeout_is_a_setting(db, ojs):
    ojs(HEARTBEAT_TIMEOUT=300)
    Worker.objects.register("patient")
    silent_for("patient", 120)
    Worker.objects.reap_dead(10)
    assert Worker.objects.get(id="patient").declared_dead_at is None


def test_a_dead_worker_without_jobs_is_declared_dead_once(db):
    Worker.objects.register("idle")
    silent_for("idle", TIMEOUT + 1)
    assert Worker.objects.reap_dead(10) == 0
    assert Worker.objects.reap_dead(10) == 0
    assert Worker.objects.get(id="idle").declared_dead_at is not None
    assert Event.objects.filter(type="worker.stopped", extra__reason="dead").count() == 1


def test_the_rows_of_dead_workers_are_pruned_after_their_retention(db, ojs):
    ojs(RETENTION={"dead_workers": 60})
    for name in ("long-dead", "just-dead"):
        Worker.objects.register(name)
        silent_for(name, TIMEOUT + 1)
    Worker.objects.reap_dead(10)
    Worker.objects.filter(id="long-dead").update(declared_dead_at=ago(seconds=61))
    assert Job.objects.prune(100)["dead_workers"] == 1
    assert list(Worker.objects.values_list("id", flat=True)) == ["just-dead"]


def test_a_client_that_only_fetched_is_never_declared_dead(claim):
    # No registration, no heartbeat: only its visibility timeout protects the job.
    job = update(claim("fetch-only"), started_at=ago(days=1))
    assert Worker.objects.reap_dead(10) == 0
    assert reload(job).state == "active"


def test_only_the_dead_workers_jobs_are_recovered(claim):
    Worker.objects.register("dead")
    Worker.objects.register("alive")
    dead_job, alive_job = claim("dead"), claim("alive")
    silent_for("dead", TIMEOUT + 1)
    Worker.objects.reap_dead(10)
    assert [reload(dead_job).state, reload(alive_job).state] == ["available", "active"]


@pytest.mark.parametrize(("on_exhaustion", "dead_letter"), [("discard", False), ("dead_letter", True)])
def test_a_recovered_job_on_its_last_attempt_is_discarded(claim, on_exhaustion, dead_letter):
    Worker.objects.register("dead")
    job = claim("dead", options={"retry": {"max_attempts": 1, "on_exhaustion": on_exhaustion}})
    silent_for("dead", TIMEOUT + 1)
    Worker.objects.reap_dead(10)
    assert (reload(job).state, reload(job).dead_letter) == ("discarded", dead_letter)


def test_dead_workers_are_reaped_in_bounded_batches_oldest_first(db):
    for n in range(3):
        Worker.objects.register(f"w{n}")
        silent_for(f"w{n}", TIMEOUT + 10 - n)
    Worker.objects.reap_dead(2)
    alive = Worker.objects.filter(declared_dead_at__isnull=True)
    assert list(alive.values_list("id", flat=True)) == ["w2"]


def test_a_dead_worker_holding_more_jobs_than_a_batch_is_emptied_over_several_ticks(claim):
    Worker.objects.register("busy")
    jobs = [claim("busy") for _ in range(5)]
    silent_for("busy", TIMEOUT + 1)
    assert [Worker.objects.reap_dead(2) for _ in range(4)] == [2, 2, 1, 0]
    assert {reload(job).state for job in jobs} == {"available"}


def test_a_worker_declared_dead_that_claims_again_is_watched_again(claim, push):
    """DESIGN invariant 13: no orphans. A frozen worker wakes up after being declared dead and
    FETCHes; its row is revived, so if it then dies for good its new job is recovered by the
    heartbeat timeout like any other, not left to the visibility timeout."""
    Worker.objects.register("zombie")
    silent_for("zombie", TIMEOUT + 1)
    Worker.objects.reap_dead(10)
    push(options={"queue": "after-death"})
    [job] = Job.objects.fetch(["after-death"], worker_id="zombie")
    worker = Worker.objects.get(id="zombie")
    assert worker.declared_dead_at is None
    assert Event.objects.filter(type="worker.started", extra__revived=True).count() == 1
    silent_for("zombie", TIMEOUT + 1)
    assert Worker.objects.reap_dead(10) == 1
    assert reload(job).state == "available"
    assert history(job) == [(1, "worker_death")]


def test_a_heartbeat_after_recovery_revives_the_worker_and_tells_it_its_jobs_are_lost(claim):
    Worker.objects.register("w1")
    job = claim("w1")
    silent_for("w1", TIMEOUT + 1)
    Worker.objects.reap_dead(10)
    reply = Worker.objects.beat("w1", held=holding(job))
    assert (reply.revived, reply.jobs_lost) == (True, holding(job))
    worker = Worker.objects.get(id="w1")
    assert (worker.last_heartbeat_at, worker.declared_dead_at) == (reply.server_time, None)
