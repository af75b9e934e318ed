"""Screenshots of the admin for the docs site, saved when OJS_DOCS_SCREENSHOTS names a directory.

    OJS_DOCS_SCREENSHOTS=docs/images pytest -m browser tests/admin/test_docs_screenshots.py

writes ``docs/images/admin-<name>.png``, what a 1280 x 800 window shows. Any
browser test may call ``docs_screenshot(page, name)``; without the variable
it does nothing, so the tests run the same either way.
"""

from __future__ import annotations

import os
from typing import Any

from .browser import REPOSITORY

DOCS_SCREENSHOTS = "OJS_DOCS_SCREENSHOTS"
# A laptop's screen, the size the docs' pictures are taken at.
DOCS_VIEWPORT = {"width": 1280, "height": 800}


def docs_screenshot(page: Any, name: str) -> None:
    """Save what the window shows as ``admin-<name>.png`` in the directory OJS_DOCS_SCREENSHOTS names."""
    directory = os.environ.get(DOCS_SCREENSHOTS)
    if not directory:
        return
    target = REPOSITORY / directory
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"admin-{name}.png"))
