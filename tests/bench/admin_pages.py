"""Benchmark: the response time of every admin page with a million jobs (not a test).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ojs_admin \\
        /work/venv/bin/python tests/bench/admin_pages.py --jobs 1000000

Migrates the database, fills it with ``--jobs`` jobs (fill.py; kept between
runs unless ``--refill`` or the count differs), starts gunicorn on
``--port``, logs in over HTTP as a superuser, and GETs each page: one
warm-up request, then ``--rounds`` timed ones. Prints the median and the
slowest of each, and flags those over the 500 ms budget. The database is
emptied of its jobs when it is refilled: point it at a scratch database.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
BUDGET_MS = 500
USERNAME, PASSWORD = "bench", "bench-password"


def setup_django() -> None:
    sys.path.insert(0, str(REPOSITORY))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    import django

    django.setup()


def prepare(jobs: int, refill: bool) -> dict[str, str]:
    """Migrate, fill if needed, make the bench workers alive; return ids the pages need."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    from django_ojs.models import Job
    from tests.bench.fill import TYPES, fill

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM (SELECT 1 FROM django_ojs_job LIMIT %s) t", [jobs + 1])
        present = cursor.fetchone()[0]
    if refill or present != jobs:
        print(f"filling {jobs:,} jobs ...", flush=True)
        started = time.perf_counter()
        fill(jobs)
        print(f"filled in {time.perf_counter() - started:.0f} s", flush=True)
    with connection.cursor() as cursor:
        # Heartbeats as live workers would have sent them, but for the two meant to look dead.
        cursor.execute(
            "UPDATE django_ojs_worker SET last_heartbeat_at = now() - interval '2 seconds' "
            "WHERE id NOT IN ('bench-worker-18', 'bench-worker-19')"
        )
        # In-process workers that handle every type but the last: its waiting jobs are the ones
        # no running worker can run, which the overview looks for among every queue's backlog.
        cursor.execute("UPDATE django_ojs_worker SET handles = %s::jsonb", [json.dumps(TYPES[:-1])])
    user, _ = User.objects.get_or_create(username=USERNAME)
    user.is_staff = user.is_superuser = True
    user.set_password(PASSWORD)
    user.save()
    dead = Job.objects.filter(state="discarded").order_by("-seq").values_list("seq", "id").first()
    big = Job.objects.filter(args__0__row=1).values_list("seq", flat=True).first()
    some = Job.objects.filter(seq=jobs // 2).values_list("id", flat=True).first()
    return {"dead_seq": str(dead[0]), "dead_id": str(dead[1]), "big_seq": str(big), "some_id": str(some)}


def pages(ids: dict[str, str]) -> list[tuple[str, str]]:
    jobs, dead_letter = "/admin/django_ojs/job/", "/admin/django_ojs/deadletterjob/"
    return [
        ("admin index", "/admin/"),
        ("overview", "/admin/django_ojs/overview/"),
        ("jobs", jobs),
        ("jobs, page 2", f"{jobs}?p=2"),
        ("jobs, last reachable page", f"{jobs}?p=200"),
        ("jobs state=available", f"{jobs}?state=available"),
        ("jobs state=pending", f"{jobs}?state=pending"),
        ("jobs state=discarded", f"{jobs}?state=discarded"),
        ("jobs state=completed", f"{jobs}?state=completed"),
        ("jobs queue=billing state=retryable", f"{jobs}?queue=billing&state=retryable"),
        ("jobs type=analytics.rollup (rarest)", f"{jobs}?type=analytics.rollup"),
        ("jobs type + state=discarded", f"{jobs}?type=analytics.rollup&state=discarded"),
        ("jobs priority=-5", f"{jobs}?priority=-5"),
        ("jobs of one worker", f"{jobs}?state=active&worker_id=bench-worker-1"),
        ("search: job id", f"{jobs}?q={ids['some_id']}"),
        ("search: tenant id", f"{jobs}?q=tenant-5"),
        ("search: correlation id", f"{jobs}?q=c4ca4238a0b923820dcc509a6f75849b"),
        ("search: key:value, no match", f"{jobs}?q=customer_id:nobody"),
        ("search: type", f"{jobs}?q=email.digest"),
        ("search: no match at all", f"{jobs}?q=no-such-thing"),
        ("job page (3 errors)", f"{jobs}{ids['dead_seq']}/change/"),
        ("job page (300 KB args)", f"{jobs}{ids['big_seq']}/change/"),
        ("dead letter", dead_letter),
        ("dead letter error_type", f"{dead_letter}?error_type=ConnectionError"),
        ("dead letter queue=billing", f"{dead_letter}?queue=billing"),
        ("dead letter job page", f"{dead_letter}{ids['dead_seq']}/change/"),
        ("workers", "/admin/django_ojs/worker/"),
        ("workers live refresh (JSON)", "/admin/django_ojs/worker/live/"),
        ("queues", "/admin/django_ojs/queue/"),
        ("api keys", "/admin/django_ojs/apikey/"),
    ]


def start_server(port: int) -> subprocess.Popen:
    """gunicorn as example_project/gunicorn.conf.py runs it, on two workers (this machine's cores)."""
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "example_project/gunicorn.conf.py", "--bind", f"127.0.0.1:{port}",
         "--workers", "2", "--log-level", "warning", "--access-logfile", "/dev/null"],
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=2).read()
            return server
        except OSError:
            if server.poll() is not None:
                raise SystemExit("gunicorn exited") from None
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("gunicorn did not start")


def logged_in_opener(base: str) -> urllib.request.OpenerDirector:
    cookies = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
    form = opener.open(f"{base}/admin/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)[1]
    body = urllib.parse.urlencode(
        {"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": token, "next": "/admin/"}
    ).encode()
    page = opener.open(f"{base}/admin/login/", body).read().decode()
    if "Log out" not in page:
        raise SystemExit("could not log in")
    return opener


def measure(opener: urllib.request.OpenerDirector, url: str, rounds: int) -> tuple[list[float], int, int]:
    times, status, size = [], 0, 0
    for index in range(rounds + 1):
        started = time.perf_counter()
        with opener.open(url) as response:
            body = response.read()
            status = response.status
        if index:  # the first request warms caches and connections
            times.append((time.perf_counter() - started) * 1000)
        size = len(body)
    return times, status, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--refill", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=8201)
    options = parser.parse_args()
    if "DATABASE_URL" not in os.environ:
        raise SystemExit("set DATABASE_URL to a scratch PostgreSQL database")
    setup_django()
    ids = prepare(options.jobs, options.refill)
    server = start_server(options.port)
    try:
        base = f"http://127.0.0.1:{options.port}"
        opener = logged_in_opener(base)
        print(f"\n{options.jobs:,} jobs; {options.rounds} timed requests per page after one warm-up\n")
        print(f"{'page':40} {'median':>9} {'slowest':>9} {'status':>6} {'KB':>6}")
        over = []
        for name, path in pages(ids):
            times, status, size = measure(opener, base + path, options.rounds)
            median, slowest = statistics.median(times), max(times)
            flag = "  OVER BUDGET" if median > BUDGET_MS else ""
            print(f"{name:40} {median:7.0f}ms {slowest:7.0f}ms {status:6} {size / 1024:6.0f}{flag}", flush=True)
            if median > BUDGET_MS:
                over.append(name)
        print(f"\n{len(over)} page(s) over {BUDGET_MS} ms (median)" + (f": {', '.join(over)}" if over else ""))
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
