"""Driving the admin in Chromium: the browser, logging in, screenshots, layout checks, an ojs_worker process.

Playwright's own browser download cannot work on this network, so the
system Chromium (``apt-get install chromium``) is launched by path, with
the flags that keep it from calling out.
"""

from __future__ import annotations

import os
import re
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
# Per tox environment (OJS_TEST_RUN): two run side by side under `tox run-parallel`.
SCREENSHOTS = REPOSITORY / "test-artifacts" / "screenshots" / (os.environ.get("OJS_TEST_RUN") or "pytest")
CHROMIUM = Path(os.environ.get("OJS_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
WORKER_COMMAND = REPOSITORY / "django_ojs" / "management" / "commands" / "ojs_worker.py"
PASSWORD = "correct horse battery staple"
# A laptop's screen: the console is built to be read whole at this size.
VIEWPORT = {"width": 1280, "height": 800}
# Set to a directory (docs/images) to have the tests save the docs site's
# screenshots of the admin there: OJS_DOCS_SCREENSHOTS=docs/images pytest -m browser tests/admin.
DOCS_SCREENSHOTS = "OJS_DOCS_SCREENSHOTS"
# The one way the console writes a point in time (django_ojs/admin/display.py).
TIME_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z")
# Anything that looks like a date and time, in whatever format: each must be TIME_FORMAT.
TIME_LIKE = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z| ?UTC|[+-]\d{2}:?\d{2})?"
    r"|\b\d{1,2}:\d{2}(?::\d{2})? ?(?:[ap]\.m\.|[AP]M)"
    r"|\b(?:Jan|Feb|March|April|May|June|July|Aug|Sept|Oct|Nov|Dec)[a-z]*\.? \d{1,2}, \d{4}"
)


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def docs_screenshot(page: Any, name: str) -> None:
    """What the screen shows, saved as ``admin-<name>.png`` for the docs site, when OJS_DOCS_SCREENSHOTS names a directory."""
    directory = os.environ.get(DOCS_SCREENSHOTS)
    if not directory:
        return
    target = REPOSITORY / directory
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"admin-{name}.png"))


# Every cell of a list, every action control and button: its box must lie within the window.
_MEASURED = (
    "#result_list th, #result_list td, #ojs-rate-limits th, #ojs-rate-limits td, .ojs-workers th, .ojs-workers td, "
    ".actions select, .actions button, .object-tools a, .ojs-move-button, .submit-row input, #changelist-filter, "
    "#toolbar input, .paginator"
)


def overflowing(page: Any) -> list[str]:
    """What does not fit the window across: a sideways scroll of the page or of a list, a box past
    an edge, a page's button over its title."""
    return page.evaluate(
        """(selector) => {
            const width = document.documentElement.clientWidth;
            const found = [];
            if (document.documentElement.scrollWidth > width) {
                found.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px wide`);
            }
            document.querySelectorAll('.results').forEach((list) => {
                if (list.scrollWidth > list.clientWidth) {
                    found.push(`the list scrolls sideways: ${list.scrollWidth} px in ${list.clientWidth}`);
                }
            });
            document.querySelectorAll(selector).forEach((element) => {
                const box = element.getBoundingClientRect();
                if (box.width && (box.right > width + 0.5 || box.left < -0.5)) {
                    const name = element.className || element.tagName.toLowerCase();
                    found.push(`${name} "${element.innerText.trim().slice(0, 40)}" spans ${box.left}-${box.right} px`);
                }
            });
            const titles = [...document.querySelectorAll('#content > h1, #content > h2')];
            document.querySelectorAll('.object-tools li').forEach((button) => {
                const box = button.getBoundingClientRect();
                titles.forEach((title) => {
                    // The text's own extent: a heading's box spans the whole width.
                    const text = document.createRange();
                    text.selectNodeContents(title);
                    const other = text.getBoundingClientRect();
                    if (box.left < other.right && other.left < box.right && box.top < other.bottom && other.top < box.bottom) {
                        found.push(`the button "${button.innerText.trim()}" covers the title "${title.innerText.trim()}"`);
                    }
                });
            });
            return found;
        }""",
        _MEASURED,
    )


def times_not_in_the_format(page: Any) -> list[str]:
    """Every date and time the page shows that is not in TIME_FORMAT.

    In its text, and in each <time>: its text, or its title where the text is
    a distance alone ("3 min ago", the compact form).
    """
    wrong = [text for text in TIME_LIKE.findall(page.inner_text("body")) if not TIME_FORMAT.fullmatch(text)]
    times = page.eval_on_selector_all("time", "(times) => times.map((time) => [time.innerText, time.title])")
    for text, title in times:
        if not (TIME_FORMAT.fullmatch(text) or TIME_FORMAT.fullmatch(title)):
            wrong.append(f"<time title={title!r}>{text}</time>")
    return wrong


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
