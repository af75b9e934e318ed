"""Settings of the ``ojs_worker`` / ``ojs_reaper`` processes the worker tests start.

The test settings, plus persistent connections (the handlers' threads must
not reconnect for every job) and the timing knobs the tests shorten through
the environment.
"""

import json
import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES, OJS

if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = None

if os.environ.get("OJS_EXECUTION_MIDDLEWARE"):  # tests/worker/test_async_handlers.py
    OJS["EXECUTION_MIDDLEWARE"] = json.loads(os.environ["OJS_EXECUTION_MIDDLEWARE"])
if os.environ.get("OJS_CONN_HEALTH_CHECKS"):  # tests/worker/test_async_handlers.py
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

for name in ("HEARTBEAT_TIMEOUT", "REAPER_INTERVAL", "LISTEN_POLL_INTERVAL"):
    if f"OJS_{name}" in os.environ:
        OJS[name] = float(os.environ[f"OJS_{name}"])
if os.environ.get("OJS_CRON"):  # periodic jobs declared in code (tests/reaper/test_code_schedules.py)
    OJS["CRON"] = json.loads(os.environ["OJS_CRON"])
if os.environ.get("OJS_WORKER_QUEUES"):  # tests/worker/test_no_silent_traps.py
    OJS["WORKER_QUEUES"] = json.loads(os.environ["OJS_WORKER_QUEUES"])
if os.environ.get("OJS_DEBUG"):  # Django logs every query (tests/worker/test_no_silent_traps.py)
    DEBUG = True
if os.environ.get("OJS_OMIT_BACKTRACES"):
    OJS["OMIT_BACKTRACES"] = True

# Behind PgBouncer in transaction mode (tests/worker/test_pgbouncer.py): LISTEN
# on a direct connection to PostgreSQL, or not at all.
if os.environ.get("OJS_LISTEN_DATABASE_URL"):
    import environ

    DATABASES["listen"] = environ.Env.db_url_config(os.environ["OJS_LISTEN_DATABASE_URL"])
    OJS["LISTEN"] = "listen"
elif os.environ.get("OJS_LISTEN") == "off":
    OJS["LISTEN"] = False
