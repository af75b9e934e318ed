"""Opaque cursors and page parameters of the list endpoints: django_ojs.api.pagination."""

from __future__ import annotations

import base64
import json

import pytest

from django_ojs.api.pagination import Page, decode_cursor, encode_cursor, page_of
from django_ojs.protocol.errors import InvalidRequest


@pytest.mark.parametrize("offset", [0, 1, 50, 10**6])
def test_a_cursor_round_trips_its_offset(offset):
    cursor = encode_cursor(offset)
    assert "=" not in cursor
    assert decode_cursor(cursor) == offset


def test_the_next_cursor_points_past_the_page():
    meta = Page(limit=10, offset=20).meta(has_more=True, total=95)
    assert meta == {"limit": 10, "offset": 20, "has_more": True, "total": 95, "next_cursor": encode_cursor(30)}
    assert page_of({"cursor": meta["next_cursor"], "limit": "10"}) == Page(limit=10, offset=30)


def test_the_last_page_has_no_next_cursor():
    assert "next_cursor" not in Page(limit=10, offset=0).meta(has_more=False)


def test_page_of_defaults_to_the_configured_page_size():
    assert page_of({}) == Page(limit=50, offset=0)
    assert page_of({"limit": "", "offset": ""}) == Page(limit=50, offset=0)
    assert page_of({"limit": "200", "offset": "3"}) == Page(limit=200, offset=3)


def _b64(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


@pytest.mark.parametrize("cursor", [
    "not base64!", "e30", _b64({"offset": 3}), _b64({"o": -1}), _b64({"o": "3"}), _b64([3]),
    _b64(3), base64.urlsafe_b64encode(b"\xff\xfe").decode(),
])
def test_a_forged_cursor_is_refused(cursor):
    with pytest.raises(InvalidRequest) as raised:
        decode_cursor(cursor)
    assert raised.value.field == "cursor"


@pytest.mark.parametrize(("params", "field"), [
    ({"limit": "0"}, "limit"),
    ({"limit": "201"}, "limit"),
    ({"limit": "ten"}, "limit"),
    ({"offset": "-1"}, "offset"),
    ({"offset": "1.5"}, "offset"),
    ({"cursor": "garbage"}, "cursor"),
    ({"offset": str(10**9 + 1)}, "offset"),
    ({"cursor": encode_cursor(10**30)}, "offset"),
])
def test_bad_page_parameters_name_their_field(params, field):
    with pytest.raises(InvalidRequest) as raised:
        page_of(params)
    assert raised.value.field == field
