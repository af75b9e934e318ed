"""ojs-progress: parsing, clamping, monotonic merge, and what a read shows in each state."""

from __future__ import annotations

import pytest

from django_ojs.protocol.durable import (
    MAX_CHECKPOINT_BYTES,
    MAX_STEP_NAME_CHARS,
    MAX_STEP_RESULT_BYTES,
    check_step_name,
    check_step_result,
)
from django_ojs.protocol.errors import InvalidRequest
from django_ojs.protocol.progress import (
    MAX_MESSAGE_CHARS,
    Report,
    aggregate,
    combine,
    crossed,
    event_due,
    make,
    merge,
    parse,
    percent,
    view,
)


@pytest.mark.parametrize(("given", "stored"), [(-0.5, 0.0), (1.3, 1.0), (0.47, 0.47), (1, 1.0)])
def test_numeric_progress_is_clamped_never_rejected(given, stored):
    assert make(given).progress == stored


@pytest.mark.parametrize("body", [
    {}, {"progress": "half"}, {"progress": True}, {"progress": float("nan")}, {"data": [1]},
    {"data": {"x": "y" * 5000}}, [0.5], None, {"message": 3}, {"message": "x" * (MAX_MESSAGE_CHARS + 1)},
    {"colour": "red"},
])
def test_unusable_reports_are_invalid_requests(body):
    with pytest.raises(InvalidRequest):
        parse(body)


def test_numeric_progress_never_goes_back_within_an_attempt_but_data_moves_on():
    first = merge(None, 1, Report(0.6, {"phase": "a"}), "t1")
    second = merge(first, 1, Report(0.4, {"phase": "b"}), "t2")
    assert (second["progress"], second["data"], second["updated_at"]) == (0.6, {"phase": "b"}, "t2")
    assert merge(second, 1, Report(None, {"phase": "c"}), "t3")["progress"] == 0.6


def test_a_new_attempt_starts_from_nothing():
    old = merge(None, 1, Report(0.8, {"phase": "a"}), "t1")
    fresh = merge(old, 2, Report(0.1), "t2")
    assert (fresh["attempt"], fresh["progress"], fresh["data"]) == (2, 0.1, None)


def test_reads_follow_the_lifecycle():
    stored = merge(None, 2, Report(0.73, {"rows": 73}), "t")
    nothing = {"progress": None, "data": None, "message": None, "updated_at": None}
    assert view("active", 2, stored)["progress"] == 0.73
    assert view("active", 3, stored) == nothing  # §5.3: the next attempt's progress starts empty
    assert view("completed", 2, stored)["progress"] == 1.0  # §8.1
    assert view("retryable", 2, stored)["progress"] == 0.73  # §8.2
    assert view("discarded", 2, stored)["data"] == {"rows": 73}
    assert view("completed", 1, None) == nothing  # no progress used: not invented


def test_percent():
    assert (percent(0.473), percent(1.0), percent(None)) == ("47%", "100%", "")


def test_members_beyond_the_spec_are_ignored_not_refused():
    # §4: fire-and-forget; an SDK that sends a member this server does not know is still heard.
    report = parse({"progress": 0.5, "message": "loading", "colour": "red"})
    assert report == Report(0.5, None, "loading")


def test_a_checkpoint_is_a_member_and_alone_is_a_report_but_no_progress():
    report = parse({"progress": 0.5, "checkpoint": {"row": 5}})
    assert (report.checkpoint, report.checkpoint_bytes, report.reports_progress) == ({"row": 5}, 9, True)
    alone = parse({"checkpoint": {}})
    assert alone.checkpoint == {} and not alone.reports_progress


@pytest.mark.parametrize("checkpoint", [[1], "row 5", 5, {"x": "y" * MAX_CHECKPOINT_BYTES}, {"x": float("nan")}])
def test_a_checkpoint_that_is_no_object_or_too_big_is_refused(checkpoint):
    with pytest.raises(InvalidRequest) as refused:
        parse({"checkpoint": checkpoint})
    assert refused.value.details["field"] == "checkpoint"


def test_step_names_and_results_are_bounded():
    assert check_step_name("rows:1200") == "rows:1200"
    for bad in ("", " ", "x" * (MAX_STEP_NAME_CHARS + 1), "a\nb", 5):
        with pytest.raises(InvalidRequest):
            check_step_name(bad)
    assert check_step_result({"id": "ch_1"}) == 13
    for bad in ("x" * MAX_STEP_RESULT_BYTES, {1, 2}, float("inf")):
        with pytest.raises(InvalidRequest):
            check_step_result(bad)
    assert parse({"message": "x" * MAX_MESSAGE_CHARS}).message == "x" * MAX_MESSAGE_CHARS


def test_data_and_message_stay_until_replaced():
    first = merge(None, 1, Report(0.2, {"rows": 2}, "loading"), "t1")
    second = merge(first, 1, Report(0.3), "t2")
    assert (second["data"], second["message"]) == ({"rows": 2}, "loading")
    assert merge(second, 1, Report(message="writing"), "t3")["message"] == "writing"
    assert merge(second, 2, Report(0.1), "t4")["message"] is None  # §5.3: a new attempt starts empty
    assert view("active", 1, second)["message"] == "loading"


def test_reports_held_back_combine_as_the_store_would():
    earlier, later = Report(0.6, {"a": 1}, "one"), Report(0.4, None, None)
    assert combine(earlier, later) == Report(0.6, {"a": 1}, "one")
    assert combine(Report(None, {"a": 1}), Report(0.2, None, "two")) == Report(0.2, {"a": 1}, "two")


@pytest.mark.parametrize(("before", "after", "mark"), [
    (None, 0.1, None), (None, 0.25, 0.25), (0.2, 0.3, 0.25), (0.3, 0.49, None), (0.1, 0.8, 0.75),
    (0.9, 1.0, 1.0), (0.5, 0.5, None), (0.5, None, None),
])
def test_milestones_crossed(before, after, mark):
    assert crossed(before, after) == mark


def test_events_are_throttled_but_the_first_report_and_milestones_always_record_one():
    first = merge(None, 1, Report(0.1), "t1")
    assert event_due(None, first, None, 30.0)  # the attempt's first report
    second = merge(first, 1, Report(0.2), "t2")
    assert not event_due(first, second, 1.0, 30.0)
    assert event_due(first, second, 30.0, 30.0)
    assert event_due(second, merge(second, 1, Report(0.26), "t3"), 1.0, 30.0)  # crossed 25 %
    assert event_due(first, second, 0.0, 0.0)  # interval 0: every report


def test_workflow_aggregates_follow_section_9():
    steps = [("completed", None), ("active", 0.73), ("waiting", None)]
    assert aggregate("chain", steps) == 0.5767  # §14.5: (1.0 + 0.73 + 0.0) / 3
    assert aggregate("group", steps) == aggregate("dag", steps) == 0.5767
    assert aggregate("batch", steps) == 0.3333  # completed / total
    assert aggregate("chain", []) is None
