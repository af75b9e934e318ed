"""Settings of the ``ojs_worker`` process the admin's browser tests start: the test
settings plus the app holding their job handlers. The database comes from
``DATABASE_URL``, which the tests point at their own test database."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.admin.worker_app"]
