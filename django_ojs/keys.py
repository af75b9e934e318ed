"""API keys: generation, hashing, scopes, and the per-process cache of verified keys.

A key is shown once, when it is created; the store keeps its SHA-256 digest.
Keys are 256-bit random tokens, so a plain digest is enough to make a leaked
table useless (password hashing exists for guessable secrets).

A key may have an end (``expires_at``): from then on it is refused, in every
process at once, since the end travels with the cached key and is compared on
each request. A key is in one of three states, as every surface names them
(``key_status``): active, expired, revoked.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from .conf import ojs_settings
from .protocol.durations import parse_duration

if TYPE_CHECKING:
    from .models import ApiKey

KEY_PREFIX = "ojs_"
# What each scope allows, as the admin's form and the command's help say it. Every
# key may also read one job, workflow, result or progress by its id (``read``).
# Cancelling is a scope of its own, not part of ``enqueue``: ojs-security §7.5
# gives cancel to operators and admins, not producers, and MUST be enforced; an
# operator's key is read + cancel, a producer that must withdraw its jobs is
# given enqueue + cancel on purpose.
SCOPE_ALLOWS = {
    "read": "listings, statistics, events, metrics",
    "enqueue": "push, activate, signal, workflows",
    "cancel": "cancel a job or a workflow",
    "worker": "fetch, ack, fail, heartbeat",
    "admin": "everything, including the dead letter's retry and purge, queue control and cron changes",
}
SCOPES = tuple(SCOPE_ALLOWS)
SCOPES_EXPLAINED = "; ".join(f"{scope}: {allows}" for scope, allows in SCOPE_ALLOWS.items())
# What listing and inspecting the system needs: the binding's lists (queues, the
# dead letter, cron, rate limits), the event feed, the metrics and the admin API's
# reads. Not a scope a key holds but a requirement, met by ``read`` or ``admin``
# only: ojs-security §7.5 lets neither producers nor workers inspect jobs or list
# queues, and ojs-admin-api §13.1 separates these reads (ojs:admin:read) from the
# writes, which need ``admin``. A job's id, which its producer got back from PUSH
# and its worker from FETCH, still reads that one job with any key.
INSPECT = "read or admin"
# Said wherever an admin key is made (the command, the admin's form), which never implies the scope.
ADMIN_WARNING = (
    "An admin key may do every operation, including purging the dead letter, pausing queues, "
    "changing cron and cancelling any job. Keep it for administrators: operators need read and cancel, "
    "services enqueue or worker."
)


# What a key reads as on every surface: the admin's list and filter, the
# command's output, the 401's message and the log.
ACTIVE, EXPIRED, REVOKED = "active", "expired", "revoked"
# A lifetime in days ("90d"), besides the durations the wire reads ("PT12H", "12h").
_DAYS = re.compile(r"(\d+)d", re.ASCII)


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def grants(scopes: Iterable[str], required: str) -> bool:
    """Does a key with ``scopes`` allow an operation that needs ``required``?

    ``admin`` allows everything, and any scope allows reading, except the
    admin API's reads (``INSPECT``): ``read`` or ``admin``.
    """
    held = set(scopes)
    if required == INSPECT:
        return bool(held & {"read", "admin"})
    return "admin" in held or required in held or (required == "read" and bool(held))


def normalise_scopes(scopes: Iterable[str]) -> list[str]:
    chosen = list(dict.fromkeys(scopes))
    unknown = [scope for scope in chosen if scope not in SCOPES]
    if unknown or not chosen:
        raise ValueError(f"scopes must be chosen from {', '.join(SCOPES)}; got {chosen or 'none'}")
    return chosen


def parse_lifetime(text: str) -> dt.timedelta:
    """A key's lifetime as an operator writes it: ``90d``, ``12h``, ``P90D``; ValueError unless positive."""
    days = _DAYS.fullmatch(text.strip())
    try:
        lifetime = dt.timedelta(days=int(days[1])) if days else parse_duration(text)
    except (ValueError, OverflowError):
        raise ValueError(f"{text!r} is not a duration such as 90d, 12h or P90D") from None
    if lifetime <= dt.timedelta(0):
        raise ValueError(f"{text!r} is not a positive duration: a key's lifetime must be longer than nothing")
    return lifetime


def key_status(revoked_at: dt.datetime | None, expires_at: dt.datetime | None, now: dt.datetime) -> str:
    """``revoked`` (an operator's act, so it wins), ``expired`` once ``expires_at`` is past, else ``active``."""
    if revoked_at is not None:
        return REVOKED
    if expires_at is not None and expires_at <= now:
        return EXPIRED
    return ACTIVE


def status_filter(status: str, now: dt.datetime) -> Q:
    """The keys ``key_status`` calls ``status`` at ``now``, as a filter."""
    unexpired = Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    return {
        ACTIVE: Q(revoked_at__isnull=True) & unexpired,
        EXPIRED: Q(revoked_at__isnull=True, expires_at__lte=now),
        REVOKED: Q(revoked_at__isnull=False),
    }[status]


class ApiKeyManager(models.Manager["ApiKey"]):
    def issue(self, name: str, scopes: Iterable[str], *, expires_in: dt.timedelta | None = None) -> tuple[ApiKey, str]:
        """Create a key, refused from ``expires_in`` on (None: never); return it with its secret, never stored."""
        secret = generate_key()
        key = self.create(
            name=name,
            prefix=secret[: len(KEY_PREFIX) + 8],
            key_hash=hash_key(secret),
            scopes=normalise_scopes(scopes),
            expires_at=None if expires_in is None else timezone.now() + expires_in,
        )
        return key, secret

    def revoke(self, key_ids: Iterable[int]) -> int:
        """Revoke the keys that are still active; return how many this call revoked.

        This process stops accepting them at once; other processes within
        ``OJS["API_KEY_CACHE_SECONDS"]`` (``KeyCache``).
        """
        revoked = self.filter(pk__in=list(key_ids), revoked_at__isnull=True).update(revoked_at=Now())
        key_cache.forget()
        return revoked

    def authenticate(self, secret: str) -> ApiKey | None:
        """The active key with this secret, or None (neither revoked nor expired), uncached."""
        return self.filter(status_filter(ACTIVE, timezone.now()), key_hash=hash_key(secret)).first()

    def verify(self, secret: str) -> ApiKey | None:
        """The unrevoked key with this secret, or None; cached for a bounded time (``KeyCache``).

        An expired key is returned too, so that the caller can say it expired
        (``api/auth.py``): its ``expires_at`` is compared on every request, the
        cached key's as well.
        """
        digest = hash_key(secret)
        key = key_cache.get(digest)
        if key is None:
            key = self.filter(key_hash=digest, revoked_at__isnull=True).first()
            if key is not None:
                key_cache.put(digest, key)
        return key


class KeyCache:
    """Verified keys by digest, each for ``OJS["API_KEY_CACHE_SECONDS"]`` (0: off).

    Per process: a request with a key this process verified recently costs
    no query. The price is the bound on revocation: a key revoked (or its
    scopes changed) in another process keeps working for at most that many
    seconds in this one. This process forgets a key at once when it revokes
    it (``ApiKeyManager.revoke``). Unknown and revoked keys are not cached,
    so a newly issued key works at once.
    """

    MAX_ENTRIES = 1024

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, digest: str) -> Any:
        with self._lock:
            entry = self._entries.get(digest)
        return entry[1] if entry is not None and entry[0] > time.monotonic() else None

    def put(self, digest: str, key: Any) -> None:
        ttl = ojs_settings.API_KEY_CACHE_SECONDS
        if ttl <= 0:
            return
        now = time.monotonic()
        with self._lock:
            if len(self._entries) >= self.MAX_ENTRIES:
                self._entries = {d: e for d, e in self._entries.items() if e[0] > now}
                if len(self._entries) >= self.MAX_ENTRIES:
                    self._entries.clear()
            self._entries[digest] = (now + ttl, key)

    def forget(self) -> None:
        with self._lock:
            self._entries.clear()


key_cache = KeyCache()
