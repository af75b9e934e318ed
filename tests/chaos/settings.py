"""Settings of the processes a chaos or outage run starts (workers, reapers, gunicorn, the feeder).

The worker tests' settings (timings from the environment, persistent
connections) plus the chaos handlers and their execution table, and the
heartbeat interval from the environment too (``manage.py check`` compares
it with the heartbeat timeout).
"""

import os

from tests.worker.settings import *  # noqa: F403
from tests.worker.settings import INSTALLED_APPS, OJS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.chaos.app"]
if "OJS_HEARTBEAT_INTERVAL" in os.environ:
    OJS["HEARTBEAT_INTERVAL"] = float(os.environ["OJS_HEARTBEAT_INTERVAL"])
