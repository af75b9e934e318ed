"""Driving the admin in Chromium: the browser, logging in, screenshots, an ojs_worker process.

Playwright's own browser download cannot work on this network, so the
system Chromium (``apt-get install chromium``) is launched by path, with
the flags that keep it from calling out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection

REPOSITORY = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPOSITORY / "test-artifacts" / "screenshots"
CHROMIUM = Path(os.environ.get("OJS_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
WORKER_COMMAND = REPOSITORY / "django_ojs" / "management" / "commands" / "ojs_worker.py"
PASSWORD = "correct horse battery staple"


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def log_in(page: Any, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")


def run_action(page: Any, action: str, *values: str) -> str:
    """Tick the rows with these checkbox values, run ``action``, return the message shown."""
    for value in values:
        page.check(f'input.action-select[value="{value}"]')
    page.select_option('select[name="action"]', action)
    page.click('button[name="index"]')
    return page.inner_text("ul.messagelist")


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout} s for {what}")


def shared_database_url() -> str:
    """The URL of the test database this process uses, for a subprocess to share it."""
    settings = connection.settings_dict
    user = settings.get("USER") or "postgres"
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings['NAME']}"


@contextmanager
def ojs_worker(*queues: str, heartbeat_interval: float = 1) -> Iterator[subprocess.Popen]:
    """A real ``manage.py ojs_worker`` on the test database; stopped with SIGTERM, then killed."""
    command = [sys.executable, "manage.py", "ojs_worker", "--concurrency", "2",
               "--heartbeat-interval", str(heartbeat_interval)]
    for queue in queues:
        command += ["--queue", queue]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.admin.worker_settings",
        "DATABASE_URL": shared_database_url(),
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    log = tempfile.NamedTemporaryFile(prefix="ojs-worker-", suffix=".log", delete=False)
    process = subprocess.Popen(command, cwd=REPOSITORY, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
        if process.returncode not in (0, -signal.SIGTERM):
            print(Path(log.name).read_text()[-4000:])
        os.unlink(log.name)
