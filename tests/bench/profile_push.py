"""Where a PUSH's server CPU goes: ``python -m tests.bench.profile_push [--requests N] [--profile]``.

Sends N ``POST /ojs/v1/jobs`` (and N ``GET /bench/bare``, the floor) through the
WSGI handler in this process, as gunicorn would call it, on a fresh bench
database: the process CPU per request of each, and with ``--profile`` a
cProfile of the PUSHes sorted by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import time

from .stage import DEFAULT_SERVER, bench_database


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with bench_database(os.environ.get("DATABASE_URL", DEFAULT_SERVER)):
        from django.core.handlers.wsgi import WSGIHandler

        from django_ojs.models import ApiKey

        _, key = ApiKey.objects.issue("bench", ["admin"])
        handler = WSGIHandler()
        body = json.dumps({"type": "demo.noop", "args": []}).encode()

        def environ(method: str, path: str, data: bytes = b"") -> dict:
            return {
                "REQUEST_METHOD": method, "PATH_INFO": path, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
                "wsgi.input": io.BytesIO(data), "wsgi.url_scheme": "http", "CONTENT_LENGTH": str(len(data)),
                "CONTENT_TYPE": "application/openjobspec+json", "HTTP_AUTHORIZATION": f"Bearer {key}",
                "HTTP_HOST": "127.0.0.1",
            }

        def push() -> None:
            statuses = []
            handler(environ("POST", "/ojs/v1/jobs", body), lambda status, headers: statuses.append(status))
            assert statuses[0].startswith("201"), statuses

        def bare() -> None:
            handler(environ("GET", "/bench/bare"), lambda status, headers: None)

        for step in (push, bare):
            for _ in range(200):
                step()  # warm
        for name, step in (("bare", bare), ("push", push), ("bare", bare), ("push", push)):
            began = time.process_time()
            for _ in range(args.requests):
                step()
            print(f"{name}: {(time.process_time() - began) / args.requests * 1e3:.3f} ms CPU/request (this process)")
        if args.profile:
            profile = cProfile.Profile(time.process_time)
            profile.enable()
            for _ in range(args.requests):
                push()
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()
