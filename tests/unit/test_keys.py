"""API key secrets, digests and scopes: django_ojs.keys (pure parts)."""

from __future__ import annotations

import hashlib

import pytest

from django_ojs.keys import KEY_PREFIX, SCOPES, generate_key, grants, hash_key, normalise_scopes

OPERATIONS = ("read", "enqueue", "worker", "admin")
# Which scopes each operation accepts (keys.py: admin allows everything, any scope reads).
ACCEPTED_BY = {
    "read": {"read", "enqueue", "worker", "admin"},
    "enqueue": {"enqueue", "admin"},
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
