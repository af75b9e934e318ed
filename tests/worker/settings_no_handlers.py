"""The worker tests' settings with no app that registers a handler: a project whose handlers are misplaced."""

from tests.worker.settings import *  # noqa: F403
from tests.worker.settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if app not in ("tests.worker.probe", "example_project.demo")]
TASKS = {}
