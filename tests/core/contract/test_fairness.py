"""Fair queues: FETCH takes turns across the values of a queue's fairness key (core/fairness.py)."""

from __future__ import annotations

import datetime as dt
import functools
import threading
import traceback
from collections import Counter

import pytest
from django.db import connection
from django.utils import timezone

from django_ojs.core import queue_config, queue_settings
from django_ojs.models import FairTurn, Job, Queue
from django_ojs.protocol.errors import InvalidRequest
from tests.helpers import race


def fair(queue: str = "shared", path: str | None = "meta.tenant") -> None:
    queue_config.update(queue, queue_config.parse_config({"fairness_key": path}, queue))


def tenants_of(jobs) -> list[str]:
    return [job.meta.get("tenant", "-") for job in jobs]


def push_for(push, tenant: str | None, count: int, queue: str = "shared", **options) -> None:
    meta = {"tenant": tenant} if tenant is not None else {}
    for index in range(count):
        push(args=[index], meta=meta, options={"queue": queue, **options})


def test_a_small_tenant_is_served_at_once_behind_a_big_one(push):
    fair()
    push_for(push, "big", 20)
    push_for(push, "small", 3)
    claimed = [Job.objects.fetch(["shared"])[0] for _ in range(8)]
    # Never served yet, in value order; then the oldest last claim first.
    assert tenants_of(claimed) == ["big", "small", "big", "small", "big", "small", "big", "big"]
    # Within a tenant: enqueue order, as an unfair queue.
    assert [job.args[0] for job in claimed if job.meta["tenant"] == "big"] == [0, 1, 2, 3, 4]


def test_one_claim_shares_its_jobs_round_robin(push):
    fair()
    push_for(push, "a", 10)
    push_for(push, "b", 10)
    push_for(push, "c", 1)
    claimed = Job.objects.fetch(["shared"], count=7)
    # c has one job: its share passes to the others.
    assert Counter(tenants_of(claimed)) == {"a": 3, "b": 3, "c": 1}
    assert tenants_of(claimed)[:3] == ["a", "b", "c"]


def test_within_a_tenant_priority_then_enqueue_order(push):
    fair()
    for index, priority in enumerate([0, 10, 0, 5]):
        push(args=[index], meta={"tenant": "t"}, priority=priority, options={"queue": "shared"})
    assert [job.args[0] for job in Job.objects.fetch(["shared"], count=4)] == [1, 3, 0, 2]


def test_the_tenant_whose_last_claim_is_oldest_goes_first(push):
    fair()
    for tenant in ("a", "b", "c"):
        push_for(push, tenant, 3)
    assert tenants_of(Job.objects.fetch(["shared"], count=2)) == ["a", "b"]
    assert tenants_of(Job.objects.fetch(["shared"], count=1)) == ["c"]
    assert tenants_of(Job.objects.fetch(["shared"], count=3)) == ["a", "b", "c"]
    assert set(FairTurn.objects.filter(queue="shared").values_list("fair_key", flat=True)) == {"a", "b", "c"}


def test_jobs_without_the_key_share_one_turn(push):
    fair()
    push_for(push, None, 3)
    push_for(push, "t", 3)
    assert Job.objects.filter(queue="shared").values_list("fair_key", flat=True).distinct().count() == 2
    assert tenants_of(Job.objects.fetch(["shared"], count=4)) == ["-", "t", "-", "t"]


def test_an_args_path_names_the_key(push):
    fair(path="args.0.customer")
    for customer in ("x", "x", "x", "y"):
        push(args=[{"customer": customer}], options={"queue": "shared"})
    claimed = Job.objects.fetch(["shared"], count=2)
    assert [job.args[0]["customer"] for job in claimed] == ["x", "y"]


def test_turning_fairness_on_keys_the_waiting_jobs_and_off_forgets_them(push):
    push_for(push, "big", 5)
    push_for(push, "small", 1)
    assert set(Job.objects.values_list("fair_key", flat=True)) == {None}
    fair()
    assert set(Job.objects.values_list("fair_key", flat=True)) == {"big", "small"}
    assert tenants_of(Job.objects.fetch(["shared"], count=2)) == ["big", "small"]
    fair(path=None)
    assert set(Job.objects.filter(state="available").values_list("fair_key", flat=True)) == {None}
    assert tenants_of(Job.objects.fetch(["shared"], count=4)) == ["big"] * 4


def test_a_job_pushed_without_its_key_is_mended_by_the_next_claim(push):
    fair()
    push_for(push, "big", 3)
    push_for(push, "late", 1)
    # As a process that had not yet seen the change would have stored it.
    Job.objects.filter(meta__tenant="late").update(fair_key=None)
    assert "late" in tenants_of(Job.objects.fetch(["shared"], count=2))


def test_a_job_pushed_with_the_old_key_s_value_gets_the_new_one_once_the_change_settles(push):
    fair()
    push_for(push, "big", 2)
    fair(path="args.0")  # the waiting jobs get their args.0 at once
    assert sorted(Job.objects.values_list("fair_key", flat=True)) == ["0", "1"]
    push(args=["cust"], meta={"tenant": "big"}, options={"queue": "shared"})
    # As a process that had not yet seen the change would have stored it: the old key's value.
    Job.objects.filter(args=["cust"]).update(fair_key="big")
    # Once the change is no longer fresh (no process pushes with the old key any more), the next
    # claim gives every waiting job whose value is not its value of the key the right one.
    Queue.objects.filter(name="shared").update(updated_at=timezone.now() - dt.timedelta(minutes=10))
    queue_settings.forget()
    Job.objects.fetch(["shared"], count=1)
    assert Job.objects.get(args=["cust"]).fair_key == "cust"


def test_a_worker_naming_its_types_reaches_past_values_with_none_of_them(push):
    fair()
    for tenant in ("a", "b", "c"):
        push(type="report.other", meta={"tenant": tenant}, options={"queue": "shared"})
    push(type="report.mine", meta={"tenant": "d"}, options={"queue": "shared"})
    # a, b and c come first in turn order, but hold nothing this worker can run.
    assert tenants_of(Job.objects.fetch(["shared"], count=2, types=["report.mine"])) == ["d"]


def test_an_unfair_queue_keeps_one_line(push):
    push_for(push, "big", 3)
    push_for(push, "small", 1)
    assert tenants_of(Job.objects.fetch(["shared"], count=4)) == ["big", "big", "big", "small"]
    assert not FairTurn.objects.exists()


def test_a_bad_fairness_key_is_refused_and_changes_nothing(db):
    for bad in ("tenant", "meta.", "args.x", "meta.a.b", 7, "args.0.a.b"):
        with pytest.raises(InvalidRequest) as refused:
            queue_config.parse_config({"fairness_key": bad}, "shared")
        assert refused.value.details.get("field", "fairness_key") == "fairness_key"


def test_configuring_from_code_a_queue_no_job_could_use_is_refused_and_makes_no_queue(db):
    from django_ojs.models import Queue

    for bad in ("fq_args", "Reports", "", "-x"):
        with pytest.raises(InvalidRequest) as refused:
            queue_config.update(bad, {"fairness_key": "meta.tenant"})
        assert refused.value.details.get("field") == "name"
    assert not Queue.objects.exists()


def test_rate_limited_jobs_of_a_fair_queue_still_keep_their_limit(push):
    fair()
    for tenant in ("a", "b"):
        for index in range(3):
            push(args=[index], meta={"tenant": tenant}, options={"queue": "shared"},
                 rate_limit={"key": f"tenant-{tenant}", "concurrency": 1})
    assert sorted(tenants_of(Job.objects.fetch(["shared"], count=6))) == ["a", "b"]


@pytest.mark.postgres
def test_concurrent_fair_claims_across_two_fair_queues_take_each_job_once_and_never_deadlock(transactional_db, spec):
    for queue in ("one", "two"):
        fair(queue)
        Job.objects.push_many([spec(args=[i], meta={"tenant": tenant}, options={"queue": queue})
                               for tenant in ("a", "b", "c") for i in range(20)])
    claimed: list[str] = []

    def worker(queues: list[str]) -> None:
        # Each claim writes the turns of both queues' values: in one order, whatever the order asked.
        while jobs := Job.objects.fetch(queues, count=4):
            claimed.extend(str(job.id) for job in jobs)

    race([functools.partial(worker, ["one", "two"] if i % 2 else ["two", "one"]) for i in range(6)])
    assert len(claimed) == len(set(claimed)) == 120
    assert not Job.objects.filter(state="available").exists()


def weigh(queue: str = "shared", **config) -> None:
    queue_config.update(queue, queue_config.parse_config({"fairness_key": "meta.tenant", **config}, queue))


def test_a_value_of_weight_w_takes_up_to_w_claims_a_round(push):
    weigh(fairness_weights={"acme": 3})
    push_for(push, "acme", 20)
    push_for(push, "small", 5)
    one_by_one = [Job.objects.fetch(["shared"])[0] for _ in range(5)]
    assert tenants_of(one_by_one) == ["acme", "acme", "acme", "small", "acme"]
    # Two of acme's round left, then small's turn, then acme's next round; in claim order.
    assert tenants_of(Job.objects.fetch(["shared"], count=8)) == (
        ["acme", "acme", "small", "acme", "acme", "acme", "small", "acme"])
    assert {row.fair_key: row.used for row in FairTurn.objects.filter(queue="shared")} == {"acme": 1, "small": 0}


def test_the_default_weight_counts_for_every_value_not_named(push):
    weigh(fairness_weights={"small": 1}, fairness_default_weight=2)
    for tenant in ("a", "small"):
        push_for(push, tenant, 6)
    assert tenants_of(Job.objects.fetch(["shared"], count=6)) == ["a", "a", "small", "a", "a", "small"]


def test_a_short_value_passes_its_weighted_share_on(push):
    weigh(fairness_weights={"acme": 3, "tiny": 5})
    push_for(push, "acme", 10)
    push_for(push, "tiny", 2)
    claimed = Job.objects.fetch(["shared"], count=7)
    assert Counter(tenants_of(claimed)) == {"acme": 5, "tiny": 2}


@pytest.mark.postgres
def test_six_concurrent_claimers_of_one_weighted_queue_take_each_job_once_and_keep_the_bound(transactional_db, spec):
    weigh(fairness_weights={"big": 3})
    Job.objects.push_many([spec(args=[i], meta={"tenant": "big"}, options={"queue": "shared"}) for i in range(120)])
    Job.objects.push_many([spec(args=[i], meta={"tenant": "small"}, options={"queue": "shared"}) for i in range(10)])
    claimed: list[tuple[str, str]] = []
    lock = threading.Lock()

    def worker() -> None:
        while jobs := Job.objects.fetch(["shared"], count=2):
            with lock:
                claimed.extend((str(job.id), job.meta["tenant"]) for job in jobs)

    race([worker for _ in range(6)])
    assert len(claimed) == len({job_id for job_id, _ in claimed}) == 130
    last_small = max(index for index, (_, tenant) in enumerate(claimed) if tenant == "small")
    big_before = sum(1 for _, tenant in claimed[:last_small] if tenant == "big")
    # Three big per small, give or take the claims of the six in flight (two jobs each, a round of three).
    assert big_before <= 3 * 10 + 6 * 2 * 3, claimed


@pytest.mark.postgres
def test_six_concurrent_claimers_meeting_new_values_take_each_job_once_and_never_deadlock(transactional_db, spec):
    weigh(fairness_weights={"t0": 2, "t5": 3})
    Job.objects.push_many([spec(args=[i], meta={"tenant": f"t{t}"}, options={"queue": "shared"})
                           for i in range(10) for t in range(12)])
    claimed: list[str] = []

    def worker() -> None:
        # Every claim meets values no claim has served yet: their turns' rows are inserted concurrently.
        while jobs := Job.objects.fetch(["shared"], count=3):
            claimed.extend(str(job.id) for job in jobs)

    race([worker for _ in range(6)])
    assert len(claimed) == len(set(claimed)) == 120
    assert FairTurn.objects.filter(queue="shared").count() == 12



@pytest.mark.postgres
def test_changing_the_key_while_workers_claim_and_finish_jobs_never_fails(transactional_db, spec):
    """On PostgreSQL a finish moves the job's row to a history partition: a change of the key that
    meets a row moved since its statement began (claimed and finished meanwhile) fails with a
    serialization error unless that step runs again. Every change here must go through, and leave
    each waiting job its value of the key."""
    fair()
    Job.objects.push_many([spec(args=[f"c{i % 7}"], meta={"tenant": f"t{i % 5}"}, options={"queue": "shared"})
                           for i in range(3000)])
    stop = threading.Event()
    finished: list[int] = []
    failed: list[str] = []

    def worker() -> None:
        try:
            while not stop.is_set():
                jobs = Job.objects.fetch(["shared"], count=5)
                for job in jobs:
                    Job.objects.ack(job.id)
                finished.append(len(jobs))
        except BaseException:  # judged below, with where it was raised
            failed.append(traceback.format_exc())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for path in ["args.0", "meta.tenant", None, "args.0", "meta.tenant", "args.0"] * 2:
            fair(path=path)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not failed, "\n".join(failed)
    assert sum(finished) > 0  # the workers did finish jobs meanwhile
    # A claim whose cached configuration predates a change may have given jobs the key before it
    # meanwhile; once the change settles, the next claim gives every waiting job its value.
    Queue.objects.filter(name="shared").update(updated_at=timezone.now() - dt.timedelta(minutes=10))
    queue_settings.forget()
    Job.objects.fetch(["shared"], count=1)
    waiting = Job.objects.filter(queue="shared", state="available")
    assert waiting.exists()
    assert all(job.fair_key == job.args[0] for job in waiting), "every waiting job has its args.0"
