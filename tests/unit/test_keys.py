"""API key secrets, digests and scopes: django_ojs.keys (pure parts)."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from django_ojs.keys import (
    KEY_PREFIX,
    SCOPES,
    generate_key,
    grants,
    hash_key,
    key_status,
    normalise_scopes,
    parse_lifetime,
)

OPERATIONS = ("read", "enqueue", "cancel", "worker", "admin")
# Which scopes each operation accepts (keys.py: admin allows everything, any scope reads).
ACCEPTED_BY = {
    "read": {"read", "enqueue", "cancel", "worker", "admin"},
    "enqueue": {"enqueue", "admin"},
    "cancel": {"cancel", "admin"},
    "worker": {"worker", "admin"},
    "admin": {"admin"},
}


@pytest.mark.parametrize("held", SCOPES)
@pytest.mark.parametrize("required", OPERATIONS)
def test_a_single_scope_grants_exactly_its_operations(held, required):
    assert grants([held], required) is (held in ACCEPTED_BY[required])


def test_a_worker_key_cannot_administer_and_an_enqueue_key_cannot_fetch():
    assert not grants(["worker"], "admin")
    assert not grants(["enqueue"], "worker")
    assert not grants(["enqueue"], "cancel")  # ojs-security §7.5: producers do not cancel
    assert not grants(["read"], "enqueue")


def test_scopes_combine():
    assert grants(["enqueue", "worker"], "worker")
    assert grants(["enqueue", "worker"], "enqueue")
    assert not grants(["enqueue", "worker"], "admin")


def test_a_key_without_scopes_grants_nothing_not_even_reading():
    assert not any(grants([], required) for required in OPERATIONS)


def test_generated_keys_are_prefixed_unique_and_long():
    keys = {generate_key() for _ in range(100)}
    assert len(keys) == 100
    assert all(key.startswith(KEY_PREFIX) and len(key) >= len(KEY_PREFIX) + 43 for key in keys)


def test_the_stored_digest_is_the_sha256_of_the_key():
    assert hash_key("ojs_secret") == hashlib.sha256(b"ojs_secret").hexdigest()
    assert hash_key("ojs_secret") != hash_key("ojs_secreT")


def test_scopes_are_deduplicated_in_order():
    assert normalise_scopes(["worker", "enqueue", "worker"]) == ["worker", "enqueue"]


@pytest.mark.parametrize("scopes", [[], ["superuser"], ["read", "root"], ["Admin"]])
def test_unknown_or_missing_scopes_are_refused(scopes):
    with pytest.raises(ValueError):
        normalise_scopes(scopes)


@pytest.mark.parametrize(
    ("text", "lifetime"),
    [("90d", dt.timedelta(days=90)), ("12h", dt.timedelta(hours=12)), ("P30D", dt.timedelta(days=30)),
     ("PT90M", dt.timedelta(minutes=90)), ("1h30m", dt.timedelta(minutes=90))],
)
def test_a_lifetime_is_read_in_days_or_as_the_wire_reads_durations(text, lifetime):
    assert parse_lifetime(text) == lifetime


@pytest.mark.parametrize("text", ["0d", "0s", "PT0S", "-1d", "1w", "d", "", "90 days"])
def test_a_lifetime_that_is_not_a_positive_duration_is_refused(text):
    with pytest.raises(ValueError, match=repr(text)):
        parse_lifetime(text)


def test_a_key_is_active_until_its_end_and_revoked_wins_over_expired():
    now = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
    second = dt.timedelta(seconds=1)
    assert key_status(None, None, now) == "active"
    assert key_status(None, now + second, now) == "active"
    assert key_status(None, now, now) == "expired"
    assert key_status(now - second, now - second, now) == "revoked"
