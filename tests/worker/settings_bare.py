"""The worker tests' settings as a fresh project has them: no LOGGING at all.

``startproject`` writes no LOGGING, so Django configures only its own
``django`` logger; ``ojs_worker`` and ``ojs_reaper`` must still be heard.
"""

from tests.worker.settings import *  # noqa: F403

LOGGING = {}
