"""Rate limit policies and the budget arithmetic (pure: no database)."""

from __future__ import annotations

import datetime as dt

import pytest

from django_ojs.protocol.errors import InvalidRequest
from django_ojs.protocol.ratelimit import Limit, Usage, Window, budget, parse_job_limit

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)


def test_max_per_second_without_a_key_is_the_queues_rate():
    limit = parse_job_limit({"max_per_second": 3}, "rate_limit", queue="mail")
    assert limit == Limit(key="queue:mail", rate=Window(3, SECOND))


def test_the_spec_form_keeps_its_key_and_fields():
    limit = parse_job_limit(
        {"key": "stripe-api", "concurrency": 5, "rate": {"limit": 100, "period": "PT1M"},
         "throttle": {"limit": 10, "period": "PT1S"}, "on_limit": "reschedule"},
        "rate_limit", queue="q",
    )
    assert limit.key == "stripe-api" and limit.concurrency == 5 and limit.on_limit == "reschedule"
    assert limit.rate == Window(100, dt.timedelta(minutes=1)) and limit.throttle.interval == dt.timedelta(seconds=0.1)


@pytest.mark.parametrize(
    "value",
    [
        {"key": "bad key"},
        {"key": "k"},  # no limit at all
        {"key": "k", "concurrency": -1},
        {"key": "k", "concurrency": True},
        {"key": "k", "rate": {"limit": 0, "period": "PT1S"}},
        {"key": "k", "rate": {"limit": 1, "period": "P60D"}},
        {"key": "k", "rate": {"limit": 1}},
        {"key": "k", "concurrency": 1, "on_limit": "explode"},
        {"key": "k", "concurrency": 1, "extra": 1},
        {"rate": {"limit": 1, "period": "PT1S"}, "max_per_second": 1},
    ],
)
def test_invalid_limits_are_refused(value):
    with pytest.raises(InvalidRequest):
        parse_job_limit(value, "rate_limit", queue="q")


def test_concurrency_budget_is_what_is_left():
    limit = Limit("k", concurrency=3)
    assert budget(limit, Usage(active=1), NOW).remaining == 2
    assert budget(limit, Usage(active=5), NOW).remaining == 0


def test_a_sliding_window_reopens_a_period_after_its_oldest_start():
    limit = Limit("k", rate=Window(2, SECOND))
    full = budget(limit, Usage(starts_in_window=2, oldest_start_in_window=NOW - SECOND / 2), NOW)
    assert (full.remaining, full.retry_at, full.strategy) == (0, NOW + SECOND / 2, "rate")
    assert budget(limit, Usage(starts_in_window=1, oldest_start_in_window=NOW), NOW).remaining == 1


def test_a_throttle_spaces_starts():
    limit = Limit("k", throttle=Window(4, SECOND))
    assert budget(limit, Usage(last_start=NOW - SECOND), NOW).remaining == 1
    held = budget(limit, Usage(last_start=NOW - SECOND / 10), NOW)
    assert held.remaining == 0 and held.retry_at == NOW + SECOND * 0.15


def test_the_tightest_kind_wins_and_waits_for_the_last_to_reopen():
    limit = Limit("k", concurrency=10, rate=Window(1, SECOND), throttle=Window(1, SECOND * 2))
    verdict = budget(limit, Usage(active=0, starts_in_window=1, oldest_start_in_window=NOW, last_start=NOW), NOW)
    assert verdict.remaining == 0 and verdict.retry_at == NOW + SECOND * 2
    assert budget(Limit("k"), Usage(), NOW).remaining is None
