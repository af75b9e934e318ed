"""The HTTP reference's replies are compared by shape: what that comparison lets through and what it catches."""

from __future__ import annotations

import json

import pytest

from .exchanges import ExchangeError, as_shown, exchanges_of, format_json, shape_problems

JOB = "0195c3a0-7b2a-7000-8000-000000000042"
OTHER = "01a21acc-69ba-712c-a41d-3d3f2b093973"


def test_a_reply_of_the_same_shape_passes_with_other_ids_times_numbers_and_messages():
    shown = {"job": {"id": JOB, "state": "available", "attempt": 0, "enqueued_at": "2026-11-22T10:00:00.000Z",
                     "message": "sent to ada@example.com", "evt": f"evt_{JOB}", "progress": 0.5}}
    actual = {"job": {"id": OTHER, "state": "available", "attempt": 3, "enqueued_at": "2026-11-27T02:18:53Z",
                      "message": "sent to bob@example.com", "evt": f"evt_{OTHER}", "progress": 1}}
    assert shape_problems(shown, actual) == []


@pytest.mark.parametrize(("shown", "actual", "problem"), [
    ({"a": 1}, {"a": 1, "b": 2}, "$.b: sent, not shown"),
    ({"a": 1, "b": 2}, {"a": 1}, "$.b: shown, not sent"),
    ({"a": 1}, {"a": "1"}, "$.a: the page shows number 1, the server sent string"),
    ({"a": None}, {"a": 0}, "$.a: the page shows null"),
    ({"id": JOB}, {"id": "42"}, "$.id: the page shows an id"),
    ({"at": "2026-11-22T10:00:00Z"}, {"at": "yesterday"}, "$.at: the page shows a time"),
    ({"state": "available"}, {"state": "active"}, "$.state: the page shows 'available', the server sent 'active'"),
    ({"id": f"evt_{JOB}"}, {"id": f"job_{OTHER}"}, "the page shows 'evt_id', the server sent 'job_id'"),
    ({"ok": True}, {"ok": False}, "$.ok: the page shows true, the server sent false"),
    ([1, 2], [1], "$: the page shows 2 items, the server sent 1"),
    ([{"a": 1}], [{"b": 1}], "$[0].a: shown, not sent"),
])
def test_a_reply_that_differs_where_a_reader_would_notice_fails(shown, actual, problem):
    found = shape_problems(shown, actual)
    assert any(problem in line for line in found), found


def test_an_object_with_more_shows_some_of_its_keys_and_a_list_with_more_some_of_its_items():
    shown = {"jobs": [{"id": JOB, "state": "active", "...": "..."}, "..."], "...": "..."}
    actual = {"jobs": [{"id": JOB, "state": "active", "queue": "email"}, {"id": OTHER, "state": "active"}], "count": 2}
    assert shape_problems(shown, actual) == []
    # The items beyond those shown are held to the last one shown.
    actual["jobs"].append({"id": OTHER, "state": "completed"})
    assert shape_problems(shown, actual) == ["$.jobs[2].state: the page shows 'active', the server sent 'completed'"]
    # The keys shown must be sent.
    assert shape_problems({"job": {"result": 1, "...": "..."}}, {"job": {"id": JOB}}) == ["$.job.result: shown, not sent"]


def test_the_reply_written_into_a_page_keeps_its_cuts():
    shown = {"job": {"id": JOB, "...": "..."}, "jobs": [{"id": JOB, "...": "..."}, "..."]}
    actual = {"job": {"id": OTHER, "state": "active"}, "jobs": [{"id": OTHER, "x": 1}, {"id": JOB, "x": 2}], "n": 1}
    assert as_shown(shown, actual) == {"job": {"id": OTHER, "...": "..."}, "jobs": [{"id": OTHER, "...": "..."}, "..."],
                                       "n": 1}
    assert shape_problems(as_shown(shown, actual), actual) == []


def test_written_json_reads_back_and_fits_the_page():
    value = {"job": {"id": JOB, "args": ["ada@example.com", {"order": 42}], "meta": {}, "tags": [],
                     "retry": {"max_attempts": 3, "initial_interval": "PT1S", "backoff_coefficient": 2.0,
                               "non_retryable_errors": ["InvalidAddress"], "on_exhaustion": "dead_letter"}}}
    text = format_json(value)
    assert json.loads(text) == value
    assert max(len(line) for line in text.splitlines()) <= 92
    assert '"args": ["ada@example.com", {"order": 42}],' in text


def write_page(tmp_path, text):
    page = tmp_path / "page.md"
    page.write_text(text)
    return page


@pytest.mark.parametrize(("text", "message"), [
    ('<!-- sample: response status=200 -->\n```json\n{}\n```\n', "no shell block above it"),
    ('```sh\ncurl $OJS/a\ncurl $OJS/b\n```\n<!-- sample: response status=200 -->\n```json\n{}\n```\n', "sends 2 curl"),
    ('```sh\ncurl $OJS/ojs/v1/health\n```\n<!-- sample: response -->\n```json\n{}\n```\n', "says its status"),
    ('```sh\ncurl $OJS/ojs/v1/health\n```\n<!-- sample: response status=200 id=job.id -->\n```json\n{}\n```\n',
     "named in capitals"),
])
def test_a_response_that_answers_no_single_request_is_refused(tmp_path, text, message):
    with pytest.raises(ExchangeError, match=message):
        exchanges_of(write_page(tmp_path, text))


def test_a_response_pairs_with_the_request_above_it_and_keeps_what_it_names(tmp_path):
    page = write_page(tmp_path, (
        '```sh\ncurl -X POST $OJS/ojs/v1/jobs -d \'{"type": "a.b"}\'\n```\n\ntext\n\n'
        '<!-- sample: response status=201 ID=job.id -->\n```json\n{"job": {}}\n```\n'
    ))
    [exchange] = exchanges_of(page)
    assert (exchange.request.line, exchange.status, exchange.captures) == (1, 201, {"ID": "job.id"})
