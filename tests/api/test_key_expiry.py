"""API keys that expire, and admin keys named on purpose, on the wire: a real gunicorn, the real command."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from django_ojs.models import ApiKey
from django_ojs.protocol.durations import format_timestamp
from tests.api.gunicorn import serving
from tests.waiting import PATIENCE, wait_until


def create_key(*args: str) -> tuple[str, str]:
    """``manage.py ojs_create_api_key`` as an operator runs it: (what it printed, what it warned)."""
    out, err = io.StringIO(), io.StringIO()
    call_command("ojs_create_api_key", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_an_expired_key_is_401_at_once_in_a_server_that_cached_it(transactional_db):
    # An hour of cache: were expiry a matter of the cache lapsing, the key would
    # keep working for an hour after its end.
    with serving("", environment={"OJS_API_KEY_CACHE_SECONDS": "3600"}) as client:
        # Made once the server answers, with a lifetime that outlasts one request on a loaded machine.
        client.key = create_key("short-lived", "--scope", "read", "--expires-in", "10s", "--quiet")[0].strip()
        key = ApiKey.objects.get(name="short-lived")
        assert client.send("GET", "/ojs/v1/queues")[0] == 200  # verified, so cached in that process
        status, headers, body = wait_until(
            lambda: (answer := client.send("GET", "/ojs/v1/queues"))[0] != 200 and answer,
            timeout=PATIENCE, what="the key's expiry",
        )
        # The lean endpoints (api/plain_views.py) read the key as the DRF views do.
        pushed = client.send("POST", "/ojs/v1/jobs", {"type": "a", "args": []})
    assert timezone.now() >= key.expires_at
    assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="ojs"'
    error = json.loads(body)["error"]
    assert error["code"] == "unauthenticated"
    assert error["message"] == f"API key {key.prefix}… expired at {error['details']['expired_at']}"
    assert error["details"] == {"expired_at": format_timestamp(key.expires_at)}
    assert pushed[0] == 401 and json.loads(pushed[2])["error"]["message"] == error["message"]


def test_a_key_with_a_lifetime_works_until_then(transactional_db):
    out, _ = create_key("quarterly", "--scope", "enqueue", "--expires-in", "90d")
    key = ApiKey.objects.get(name="quarterly")
    assert abs(key.expires_at - (timezone.now() + dt.timedelta(days=90))) < dt.timedelta(minutes=1)
    assert "expires at " in out
    secret = next(line.strip() for line in out.splitlines() if line.strip().startswith("ojs_"))
    with serving(secret) as client:
        assert client.send("POST", "/ojs/v1/jobs", {"type": "a", "args": []})[0] == 201


@pytest.mark.parametrize("lifetime", ["0s", "-5d", "soon", "P0D", ""])
def test_a_lifetime_that_is_not_a_positive_duration_is_refused(db, lifetime):
    with pytest.raises(CommandError, match="--expires-in"):
        create_key("k", "--scope", "read", "--expires-in", lifetime)
    assert not ApiKey.objects.exists()


def test_a_key_without_a_lifetime_never_expires(db):
    out, _ = create_key("forever", "--scope", "read")
    assert ApiKey.objects.get(name="forever").expires_at is None
    assert "never expires" in out


# -- Admin keys are minted on purpose ---------------------------------------------------


def test_an_admin_key_is_minted_with_a_warning_on_stderr(db):
    out, err = create_key("ops", "--scope", "admin", "--quiet")
    assert out.strip().startswith("ojs_") and len(out.strip().splitlines()) == 1  # scripts read stdout
    assert "admin" in err and "every operation" in err
    _, quiet = create_key("billing", "--scope", "enqueue", "--quiet")
    assert quiet == ""


def test_the_command_names_the_scopes_it_chose(db):
    out, _ = create_key("billing")
    assert ApiKey.objects.get(name="billing").scopes == ["enqueue"]
    assert "scopes enqueue" in out and "(the default" in out
