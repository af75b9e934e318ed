"""CORS for browser dashboards (binding §20, api/cors.py): on the wire through gunicorn, and in Chromium."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core import checks
from django.urls import URLPattern, URLResolver, get_resolver

from django_ojs.api import cors
from django_ojs.models import ApiKey
from tests.api.gunicorn import serving
from tests.throwaway_postgres import free_port
from tests.waiting import wait_until

# Two origins, on ports free when the tests are collected: the dashboards' pages are served there.
ALLOWED = f"http://127.0.0.1:{free_port()}"
DISALLOWED = f"http://127.0.0.1:{free_port()}"
ALLOWING = {"OJS_CORS_ALLOWED_ORIGINS": ALLOWED}


def cors_headers(headers) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name.lower().startswith("access-control-")}


def preflight(wire, path: str, origin: str, method: str = "GET"):
    return wire.send("OPTIONS", path, key=False, headers={
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization, content-type, ojs-version"})


@pytest.mark.postgres
def test_an_allowed_origin_is_answered_and_marked_and_another_gets_no_cors_header(transactional_db):
    _, key = ApiKey.objects.issue("dashboard", ["admin"])
    with serving(key, environment=ALLOWING) as wire:
        # Preflights need no key (browsers send none), on every kind of route: DRF's, the lean POST,
        # the admin API's, an unknown path.
        for path, method in [("/ojs/v1/queues", "GET"), ("/ojs/v1/jobs", "POST"),
                             ("/ojs/v1/admin/queues/default/config", "PUT"), ("/ojs/v1/nowhere", "GET")]:
            status, headers, body = preflight(wire, path, ALLOWED, method)
            assert (status, body) == (204, b""), path
            assert cors_headers(headers) == {
                "Access-Control-Allow-Origin": ALLOWED,
                "Access-Control-Allow-Methods": "GET, POST, PUT, PATCH, DELETE, OPTIONS",
                "Access-Control-Allow-Headers": "Content-Type, Accept, Authorization, X-Request-Id, OJS-Version",
                "Access-Control-Max-Age": "86400",
            }, path
            assert "Origin" in headers["Vary"]
            # As every answer of the API (binding §6.5).
            assert headers["OJS-Version"] and headers["X-Request-Id"], path

        status, headers, _ = wire.send("GET", "/ojs/v1/queues", headers={"Origin": ALLOWED})
        assert status == 200
        assert headers["Access-Control-Allow-Origin"] == ALLOWED
        exposed = {name.strip() for name in headers["Access-Control-Expose-Headers"].split(",")}
        assert {"X-Request-Id", "OJS-Version", "Retry-After", "Location", "X-RateLimit-Remaining"} <= exposed
        assert "Origin" in headers["Vary"]
        # The lean POST and an error answer are marked too: a page must read a 401's body.
        status, headers, _ = wire.send("POST", "/ojs/v1/jobs", {"type": "cors.test", "args": []},
                                       headers={"Origin": ALLOWED})
        assert status == 201 and headers["Access-Control-Allow-Origin"] == ALLOWED and headers["Location"]
        status, headers, _ = wire.send("GET", "/ojs/v1/queues", key=False, headers={"Origin": ALLOWED})
        assert status == 401 and headers["Access-Control-Allow-Origin"] == ALLOWED

        # Another origin: no CORS header, and the request served as without an Origin.
        status, headers, body = preflight(wire, "/ojs/v1/queues", DISALLOWED)
        plain = wire.send("OPTIONS", "/ojs/v1/queues", key=False)
        assert cors_headers(headers) == {} and status == plain[0] != 204
        assert body.replace(headers["X-Request-Id"].encode(), b"") == plain[2].replace(
            plain[1]["X-Request-Id"].encode(), b"")
        status, headers, body = wire.send("GET", "/ojs/v1/queues", headers={"Origin": DISALLOWED})
        assert status == 200 and cors_headers(headers) == {}
        assert body == wire.send("GET", "/ojs/v1/queues")[2]


@pytest.mark.postgres
def test_without_allowed_origins_nothing_changes(wire):
    status, headers, _ = preflight(wire, "/ojs/v1/queues", ALLOWED)
    assert status != 204 and cors_headers(headers) == {}
    status, headers, _ = wire.send("GET", "/ojs/v1/queues", headers={"Origin": ALLOWED})
    assert status == 200 and cors_headers(headers) == {} and "Origin" not in headers.get("Vary", "")


def test_the_allowed_methods_cover_every_route():
    allowed = {method.strip().lower() for method in cors.ALLOW_METHODS.split(",")}

    def views(patterns):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from views(pattern.url_patterns)
            elif isinstance(pattern, URLPattern):
                view_class = getattr(pattern.callback, "view_class", None)
                if view_class is not None:
                    yield view_class

    served = {method for view_class in views(get_resolver("django_ojs.api.urls").url_patterns)
              for method in view_class.http_method_names if hasattr(view_class, method)}
    assert served - {"head"} <= allowed, served - allowed


@pytest.mark.parametrize("origins", [["*"], "https://dash.example.com", ["https://dash.example.com/"],
                                     ["dash.example.com"], ["https://dash.example.com/app"]])
def test_a_wildcard_or_anything_but_an_origin_fails_the_check(settings, origins):
    settings.OJS = {"CORS_ALLOWED_ORIGINS": origins}
    [error] = [m for m in checks.run_checks() if m.id == "django_ojs.E002"]
    assert "OJS['CORS_ALLOWED_ORIGINS']" in error.msg
    if origins == ["*"]:
        assert "must not be '*'" in error.msg and "needs an API key" in error.msg


def test_origins_pass_the_check(settings):
    settings.OJS = {"CORS_ALLOWED_ORIGINS": ["https://dash.example.com", "http://127.0.0.1:8080"]}
    assert [m for m in checks.run_checks() if m.id == "django_ojs.E002"] == []


# -- In Chromium: the browser itself enforces what the headers say ------------------------------

CHROMIUM = Path(os.environ.get("OJS_CHROMIUM", "/usr/bin/chromium"))
FETCH_QUEUES = """async ([url, key]) => {
    try {
        const response = await fetch(url, {headers: {Authorization: `Bearer ${key}`, "OJS-Version": "1.0.0"}});
        return {status: response.status, requestId: response.headers.get("X-Request-Id"),
                body: await response.json()};
    } catch (error) {
        return {error: String(error)};
    }
}"""


@contextlib.contextmanager
def static_site(origin: str) -> Iterator[None]:
    """A page at ``origin`` (http://127.0.0.1:<port>), served by ``python -m http.server``."""
    port = origin.rsplit(":", 1)[1]
    with tempfile.TemporaryDirectory() as root:
        Path(root, "index.html").write_text("<!doctype html><title>dashboard</title>")
        server = subprocess.Popen([sys.executable, "-m", "http.server", port, "--bind", "127.0.0.1",
                                   "--directory", root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def answers() -> bool:
                try:
                    with urllib.request.urlopen(origin + "/index.html", timeout=5) as response:
                        return response.status == 200
                except OSError:
                    if server.poll() is not None:
                        pytest.fail(f"http.server on {port} exited")
                    return False
            wait_until(answers, timeout=60, what=f"http.server on {port}")
            yield
        finally:
            server.terminate()
            server.wait(timeout=30)


@pytest.mark.browser
@pytest.mark.postgres
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")
def test_a_page_of_an_allowed_origin_reads_the_queues_and_another_is_blocked(transactional_db):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    from tests.admin.browser import CHROMIUM_ARGS

    _, key = ApiKey.objects.issue("dashboard", ["read"])
    with serving(key, environment=ALLOWING) as wire, static_site(ALLOWED), static_site(DISALLOWED), \
            sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(ALLOWED + "/index.html")
            answer = page.evaluate(FETCH_QUEUES, [wire.base + "/ojs/v1/queues", key])
            assert answer.get("status") == 200, answer
            assert "queues" in answer["body"] and answer["requestId"]

            page.goto(DISALLOWED + "/index.html")
            answer = page.evaluate(FETCH_QUEUES, [wire.base + "/ojs/v1/queues", key])
            assert "error" in answer and "Failed to fetch" in answer["error"], answer
        finally:
            browser.close()
