"""The HTTP reference shows what the server answers: its requests sent to a live server, its replies compared.

Every page with response blocks (tests/docs/exchanges.py) is followed in order
against the example project under gunicorn (tests/api/gunicorn.py) on a fresh
test database: each request is the page's own curl command, run by bash with
``$OJS`` the server, ``$KEY`` an admin key and the ``$NAME``s kept from replies
before it; the status and the reply must be what the page shows, by shape.

``OJS_DOCS_WRITE_REPLIES=1`` writes the server's replies into the pages instead
(cut as each page cuts them), for a page being written; the test still fails
where they differed, so that a change shows in the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from django_ojs.models import ApiKey
from tests.api.gunicorn import serving

from .exchanges import (
    Exchange,
    as_shown,
    exchanges_of,
    pages_with_exchanges,
    rewrite,
    shape_problems,
    value_at,
)
from .samples import ROOT

WRITE = os.environ.get("OJS_DOCS_WRITE_REPLIES") == "1"
# What curl prints: the body, then the status on a line of its own.
CURLRC = 'silent\nshow-error\nwrite-out = "\\n%{response_code}"\n'


def send(exchange: Exchange, env: dict[str, str]) -> tuple[int, Any]:
    done = subprocess.run(
        ["bash", "-c", f"set -e -o pipefail\n{exchange.request.code}"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, f"{exchange.request.id}: curl failed ({done.returncode}): {done.stderr}"
    body, _, status = done.stdout.rpartition("\n")
    try:
        return int(status), json.loads(body) if body.strip() else None
    except ValueError as exc:
        raise AssertionError(f"{exchange.request.id}: the reply is not JSON ({exc}): {body[:300]!r}") from exc


def prelude_names(exchange: Exchange) -> dict[str, str]:
    """Run the response's hidden prelude; the upper-case strings it set."""
    if not exchange.response.prelude:
        return {}
    namespace: dict[str, Any] = {"__name__": "docs_prelude"}
    exec(compile(exchange.response.prelude, f"{exchange.id} (prelude)", "exec"), namespace)
    return {name: value for name, value in namespace.items() if name.isupper() and isinstance(value, str)}


# The manifest and health name the store: the pages show PostgreSQL's, the production one.
@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("page", [str(path.relative_to(ROOT)) for path in pages_with_exchanges()])
def test_the_replies_a_page_shows_are_the_servers(page, transactional_db, tmp_path):
    path = ROOT / page
    (tmp_path / ".curlrc").write_text(CURLRC)
    _, key = ApiKey.objects.issue("docs", ["admin"])
    problems: list[str] = []
    replies: dict[int, Any] = {}
    with serving(key) as wire:
        variables = {"OJS": wire.base, "KEY": key}
        for exchange in exchanges_of(path):
            variables.update(prelude_names(exchange))
            env = {"PATH": os.environ["PATH"], "CURL_HOME": str(tmp_path), "HOME": str(tmp_path), **variables}
            status, body = send(exchange, env)
            shown = json.loads(exchange.response.code)
            found = shape_problems(shown, body)
            if status != exchange.status:
                found.insert(0, f"status {status}, the page shows {exchange.status}")
            problems += [f"{exchange.id}: {problem}" for problem in found]
            if found:
                problems.append(f"{exchange.id}: the server sent {json.dumps(body)[:2000]}")
            replies[exchange.response.line] = as_shown(shown, body)
            for name, where in exchange.captures.items():
                try:
                    variables[name] = str(value_at(body, where))
                except (KeyError, IndexError, TypeError, ValueError):
                    pytest.fail(f"{exchange.id}: keeps {name}={where}, which the reply does not hold:\n" + "\n".join(problems))
    if WRITE:
        rewrite(path, replies)
    assert not problems, "\n".join(problems)


def test_every_response_block_answers_one_request():
    """Read every page: a response block pairs with a curl request above it and says its status."""
    for path in ROOT.joinpath("docs").rglob("*.md"):
        exchanges_of(path)
