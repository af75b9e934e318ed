"""The nginx configuration of docs/how-to/serving.md, run: real nginx in front of real gunicorn.

The page's ``server`` block is taken as it is written, with only what a
machine must change: the address it listens on (a free port, plain HTTP, not
443 with a certificate), gunicorn's address in the ``upstream`` block, and
the static files' directory. So what the page tells a user to write is what
serves the admin and the API here.

The port is not 80 or 443 on purpose: a browser's ``Origin`` then carries it,
and Django's CSRF check compares it with the ``Host`` the proxy passes on.
"""

from __future__ import annotations

import contextlib
import http.client
import http.cookiejar
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from django_ojs.models import ApiKey
from tests.api.gunicorn import MEDIA_TYPE, REPO, START_BOUND, serving
from tests.conformance.harness import free_port

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
PAGE = REPO / "docs" / "how-to" / "serving.md"
CONFIG = REPO / "example_project" / "gunicorn.conf.py"


def documented_server_config() -> tuple[str, str]:
    """The page's nginx example, split into its ``upstream`` block and its ``server`` block."""
    section = PAGE.read_text().split("## Behind nginx", 1)[1]
    block = re.search(r"```nginx\n(.*?)```", section, re.DOTALL)
    assert block, "no nginx example under 'Behind nginx'"
    text = block.group(1)
    upstream = re.search(r"^upstream .*?^}\n", text, re.DOTALL | re.MULTILINE)
    server = re.search(r"^server \{.*?^}\n", text, re.DOTALL | re.MULTILINE)
    assert upstream and server
    return upstream.group(0), server.group(0)


def config_for(port: int, upstream_port: int, directory: Path) -> str:
    """The page's blocks inside the little an nginx run as a test needs (its files in ``directory``)."""
    upstream, server = documented_server_config()
    upstream = re.sub(r"server 127\.0\.0\.1:8000;", f"server 127.0.0.1:{upstream_port};", upstream)
    server = re.sub(r"listen 443 ssl;", f"listen 127.0.0.1:{port};", server)
    server = re.sub(r"alias /srv/mysite/staticfiles/;", f"alias {directory}/static/;", server)
    temp = "\n".join(f"    {kind}_temp_path {directory}/{kind};"
                     for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"pid {directory}/nginx.pid;\nerror_log {directory}/error.log;\nevents {{}}\n"
            f"http {{\n    access_log off;\n{temp}\n{upstream}{server}}}\n")


@contextlib.contextmanager
def nginx_in_front_of(upstream_port: int) -> Iterator[int]:
    """nginx on a free port, proxying to gunicorn as the page says; yields its port."""
    port = free_port()
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        (directory / "static").mkdir()
        (directory / "nginx.conf").write_text(config_for(port, upstream_port, directory))
        # -g "daemon off;": the process started is nginx's master, stopped by its PID.
        server = subprocess.Popen([NGINX, "-c", str(directory / "nginx.conf"), "-p", str(directory),
                                   "-g", "daemon off;"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_BOUND
            while True:
                assert server.poll() is None, server.stdout.read().decode(errors="replace")
                with contextlib.suppress(OSError):
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    connection.request("GET", "/ojs/v1/health")
                    if connection.getresponse().status == 200:
                        break
                assert time.monotonic() < deadline, "nginx did not answer"
                time.sleep(0.1)
            yield port
        finally:
            server.terminate()
            server.wait(30)


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture
def behind_nginx(transactional_db):
    if NGINX is None:
        pytest.skip("nginx is not installed")
    from django.contrib.auth.hashers import PBKDF2PasswordHasher
    from django.contrib.auth.models import User

    # Hashed as the example project checks it (the tests' settings hash faster, with another hasher).
    User.objects.create(username="operator", is_staff=True, is_superuser=True,
                        password=PBKDF2PasswordHasher().encode("a long password", "nginxtestsalt"))
    key = ApiKey.objects.issue("through nginx", ["enqueue", "read"])[1]
    with serving(key, config=CONFIG, workers=1) as wire, nginx_in_front_of(wire.port) as port:
        yield port, key


def test_the_admin_logs_in_through_the_proxy_on_a_port_of_its_own(behind_nginx):
    """The login form posted as a browser does, Origin and all: Django's CSRF check lets it in."""
    port, _ = behind_nginx
    base = f"http://127.0.0.1:{port}"
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
                                          NoRedirects())
    with browser.open(f"{base}/admin/login/?next=/admin/", timeout=30) as page:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.read().decode())
    assert token
    form = urllib.parse.urlencode({"csrfmiddlewaretoken": token.group(1), "username": "operator",
                                   "password": "a long password", "next": "/admin/"}).encode()
    login = urllib.request.Request(f"{base}/admin/login/?next=/admin/", data=form, method="POST",
                                   headers={"Origin": base, "Referer": f"{base}/admin/login/"})
    try:
        answer = browser.open(login, timeout=30)
    except urllib.error.HTTPError as error:
        answer = error
    assert (answer.code, answer.headers["Location"]) == (302, "/admin/"), answer.read().decode()[:300]
    with browser.open(f"{base}/admin/", timeout=30) as page:
        assert "Site administration" in page.read().decode()


def test_a_push_through_the_proxy_answers_with_the_jobs_path(behind_nginx):
    port, key = behind_nginx
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("POST", "/ojs/v1/jobs", body=b'{"type": "proxied.job", "args": []}',
                       headers={"Content-Type": MEDIA_TYPE, "Authorization": f"Bearer {key}"})
    response = connection.getresponse()
    response.read()
    assert response.status == 201
    assert re.fullmatch(r"/ojs/v1/jobs/[0-9a-f-]{36}", response.headers["Location"])
