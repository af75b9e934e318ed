"""Settings of the ``ojs_worker`` / ``ojs_reaper`` processes the worker tests start.

The test settings, plus persistent connections (the handlers' threads must
not reconnect for every job) and the timing knobs the tests shorten through
the environment.
"""

import os

from tests.settings import *  # noqa: F401,F403
from tests.settings import DATABASES, OJS

if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = None

for name in ("HEARTBEAT_TIMEOUT", "REAPER_INTERVAL", "LISTEN_POLL_INTERVAL"):
    if f"OJS_{name}" in os.environ:
        OJS[name] = float(os.environ[f"OJS_{name}"])
if os.environ.get("OJS_OMIT_BACKTRACES"):
    OJS["OMIT_BACKTRACES"] = True
