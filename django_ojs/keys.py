"""API keys: generation, hashing and scopes.

A key is shown once, when it is created; the store keeps its SHA-256 digest.
Keys are 256-bit random tokens, so a plain digest is enough to make a leaked
table useless (password hashing exists for guessable secrets).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db import models
from django.db.models.functions import Now

if TYPE_CHECKING:
    from .models import ApiKey

KEY_PREFIX = "ojs_"
# read: INFO, listings, statistics, events. enqueue: PUSH, CANCEL, ACTIVATE.
# worker: FETCH, ACK, FAIL, BEAT. admin: everything, including the dead
# letter's retry and purge, queue pause/resume and cron changes.
SCOPES = ("read", "enqueue", "worker", "admin")


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def grants(scopes: Iterable[str], required: str) -> bool:
    """Does a key with ``scopes`` allow an operation that needs ``required``?

    ``admin`` allows everything, and any scope allows reading.
    """
    held = set(scopes)
    return "admin" in held or required in held or (required == "read" and bool(held))


def normalise_scopes(scopes: Iterable[str]) -> list[str]:
    chosen = list(dict.fromkeys(scopes))
    unknown = [scope for scope in chosen if scope not in SCOPES]
    if unknown or not chosen:
        raise ValueError(f"scopes must be chosen from {', '.join(SCOPES)}; got {chosen or 'none'}")
    return chosen


class ApiKeyManager(models.Manager):
    def issue(self, name: str, scopes: Iterable[str]) -> tuple[ApiKey, str]:
        """Create a key; return it with its secret, which is never stored."""
        secret = generate_key()
        key = self.create(
            name=name,
            prefix=secret[: len(KEY_PREFIX) + 8],
            key_hash=hash_key(secret),
            scopes=normalise_scopes(scopes),
        )
        return key, secret

    def revoke(self, key_ids: Iterable[int]) -> int:
        """Revoke the keys that are still active; return how many this call revoked.

        This process stops accepting them at once; other processes within
        ``OJS["API_KEY_CACHE_SECONDS"]`` (api/auth.py ``KeyCache``).
        """
        from .api.auth import key_cache

        revoked = self.filter(pk__in=list(key_ids), revoked_at__isnull=True).update(revoked_at=Now())
        key_cache.forget()
        return revoked

    def authenticate(self, secret: str) -> ApiKey | None:
        return self.filter(key_hash=hash_key(secret), revoked_at__isnull=True).first()
