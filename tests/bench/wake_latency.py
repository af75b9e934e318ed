"""How soon ``job.wait()`` returns after the ACK commits: LISTEN/NOTIFY against polling.

``python -m tests.bench.wake_latency listen|poll`` (``DATABASE_URL`` a migrated
scratch database): 20 times, a thread waits on a job, the main thread claims
and acknowledges it, and the time from the ACK's return to the wait's is
taken. ``listen``: the fallback poll is an hour, only the notification wakes
it; ``poll``: no LISTEN, ``POLL_INTERVAL`` 0.5 s.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
ROUNDS = 20
# Long enough for the waiter to have read its job once and gone to sleep.
SETTLE = 0.3


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "listen"
    django.setup()
    from django.conf import settings
    from django.db import connections

    from django_ojs.conf import ojs_settings
    from django_ojs.core.types import Lease
    from django_ojs.models import Job
    from django_ojs.protocol.envelope import parse_job

    settings.OJS = {**settings.OJS, "LISTEN": mode == "listen", "LISTEN_POLL_INTERVAL": 3600, "POLL_INTERVAL": 0.5}
    ojs_settings.reload()
    latencies = []
    for _ in range(ROUNDS):
        job = Job.objects.push(parse_job({"type": "bench.latency", "args": [], "queue": "bench-latency"}))
        returned: list[float] = []

        def waiter(job: Job = job, returned: list[float] = returned) -> None:
            job.wait(timeout=60)
            returned.append(time.perf_counter())
            connections.close_all()

        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(SETTLE)
        [claimed] = Job.objects.fetch(["bench-latency"], worker_id="bench")
        Job.objects.ack(claimed.id, result=1, lease=Lease("bench"))
        acked = time.perf_counter()
        thread.join()
        latencies.append((returned[0] - acked) * 1000)
    print(f"{mode}: median {statistics.median(latencies):.0f} ms, max {max(latencies):.0f} ms over {ROUNDS} waits")


if __name__ == "__main__":
    main()
