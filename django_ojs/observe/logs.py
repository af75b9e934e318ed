"""Make the long-running commands' logs visible in a project that configures no LOGGING.

Django's default logging configuration handles only the ``django`` logger;
without a handler of their own, ``ojs_worker`` and ``ojs_reaper`` would
print nothing at all -- not their start, their stop nor a recovered job.
``show_on_stderr`` adds one stderr handler to the ``django_ojs`` logger, and
only when nothing would handle its records: a project whose LOGGING reaches
``django_ojs`` (a handler on it, on a parent, or on the root) keeps exactly
the configuration it wrote.
"""

from __future__ import annotations

import logging
import sys

LOGGER = "django_ojs"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def show_on_stderr() -> bool:
    """Attach a stderr handler (INFO) to ``django_ojs`` if its records would go nowhere; say if it did."""
    logger = logging.getLogger(LOGGER)
    if logger.hasHandlers():
        return False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    return True
