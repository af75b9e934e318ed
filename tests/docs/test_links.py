"""Links hold: relative links and their anchors, and the repository paths the pages name.

``mkdocs build --strict`` checks links between the site's pages; it does not
read README.md, nor links out of docs/ into the repository, nor the paths the
text names in code spans (``tests/core/pg/test_fast_paths.py``,
``core/job_columns.new_ids``), which go stale when code moves. Web addresses
are not fetched.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from .samples import ROOT, page_mode, pages

FENCED = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\((?P<target>[^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$", re.MULTILINE)
# A path the text names: a/b.py, a/b/, or module.attribute (core/job_columns.new_ids).
REPO_PATH = re.compile(r"(?:django_ojs|tests|docs|example_project)/[\w./-]*|(?:[\w-]+/)+[\w-]+\.[a-z_][a-z_0-9]*")
# Where a path written relative to the package may start.
PACKAGE_ROOTS = [ROOT, ROOT / "django_ojs", ROOT / "django_ojs" / "core"]


def prose(path: Path) -> str:
    return COMMENT.sub("", FENCED.sub("", path.read_text()))


def github_slug(title: str) -> str:
    # The heading's text: markup goes, a code span's underscores stay (`ojs_create_api_key`).
    text = re.sub(r"[`*]", "", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def mkdocs_slug(title: str) -> str:
    # Python-Markdown's toc extension, as mkdocs renders the site.
    text = unicodedata.normalize("NFKD", re.sub(r"[`*]", "", title)).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path, *, on_github: bool) -> set[str]:
    slug = github_slug if on_github else mkdocs_slug
    return {slug(match["title"]) for match in HEADING.finditer(FENCED.sub("", path.read_text()))}


def page_ids() -> list[str]:
    return [str(path.relative_to(ROOT)) for path in pages()]


@pytest.mark.parametrize("page", page_ids())
def test_relative_links_reach_a_file_and_its_anchor(page):
    path = ROOT / page
    # README is read on the repository's web view only; the docs on the site (mkdocs --strict checks those
    # anchors too) and on the repository's web view, so their anchors must hold under both slug rules.
    on_github = page == "README.md"
    broken = []
    for match in LINK.finditer(prose(path)):
        target = match["target"]
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists() or ROOT not in [destination, *destination.parents]:
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md":
            for github in {True, on_github}:
                if anchor not in anchors(destination, on_github=github):
                    where = "on GitHub" if github else "on the site"
                    broken.append(f"{target}: no heading #{anchor} in {destination.relative_to(ROOT)} ({where})")
    assert broken == []


def named_path_exists(text: str) -> bool:
    for root in PACKAGE_ROOTS:
        if (root / text).exists():
            return True
        module, dot, attribute = text.rpartition(".")
        source = root / f"{module}.py"
        if dot and "/" in module and source.is_file() and re.search(rf"^\s*(?:def|class|async def) {re.escape(attribute)}\b|^{re.escape(attribute)}\b", source.read_text(), re.MULTILINE):
            return True
    return False


@pytest.mark.parametrize("page", page_ids())
def test_repository_paths_named_in_the_text_exist(page):
    path = ROOT / page
    if page_mode(path) == "workspace":
        pytest.skip("its paths are the files of the project the page builds")
    missing = sorted({
        span for span in CODE_SPAN.findall(prose(path))
        if REPO_PATH.fullmatch(span) and not span.startswith(("ojs/", "/")) and not named_path_exists(span)
    })
    assert missing == []


def test_every_how_to_guide_is_listed_on_the_home_page():
    # The home page's tables are the site's index: a guide in the navigation that no row links
    # to is a capability a reader scanning "Every capability, and where it is" never finds.
    navigation = (ROOT / "mkdocs.yml").read_text()
    guides = re.findall(r"^\s+- [^:\n]+: (how-to/[\w-]+\.md)$", navigation, re.MULTILINE)
    home = {match["target"].partition("#")[0] for match in LINK.finditer(prose(ROOT / "docs" / "index.md"))}
    assert guides
    assert [guide for guide in guides if guide not in home] == []
