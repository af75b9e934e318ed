"""The code samples of the docs (docs/**/*.md and README.md), found and told how to run.

Every fenced block names its language; ``text`` blocks (output, diagrams,
synopses) are not run, every other one is. How a block runs is said by an
HTML comment on the line right above its fence, invisible on the site and on
the repository's page (docs/design.md, "Code samples that run"):

    <!-- sample: KIND [FLAG ...] [NAME=VALUE ...] [-- REASON] -->

and a comment may hold a hidden prelude after its first line, code run
before the block (the names a fragment uses but does not show):

    <!-- sample: run
    tomorrow = timezone.now() + dt.timedelta(days=1)
    -->

This module only reads; tests/docs/test_samples.py and test_tutorial.py run.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
DIRECTIVE = re.compile(r"<!--\s*sample:(?P<head>[^\n]*?)(?:\n(?P<prelude>.*?))?\s*-->\s*$", re.DOTALL)
PAGE_DIRECTIVE = re.compile(r"^<!--\s*samples:\s*(?P<mode>[\w-]+)\s*-->\s*$", re.MULTILINE)

# The languages a block may name, and the kinds each may be run as (the first is the default).
KINDS: dict[str, tuple[str, ...]] = {
    # run: executed as is, with its own imports, in the test project (tests/docs/site.py);
    # config: a piece of settings.py or urls.py, whose OJS, INSTALLED_APPS, URLs... are checked;
    # test: defines tests (pytest functions, Django TestCase classes) that are then run;
    # file: the content of a file of the tutorial's project (file=PATH, with append to add to it).
    "python": ("run", "config", "test", "file", "skip"),
    # check: each command must exist with the options given (manage.py's own parsers, tox.ini,
    # pyproject's extras, the HTTP API's routes); run: executed by bash (the tutorial);
    # background: started, and must stop cleanly on SIGTERM when the page ends (the tutorial);
    # with restart, the process of the same command started before is stopped first; with
    # http-error, a run block's curl may get an HTTP error the page explains (not a failure).
    "sh": ("check", "run", "background", "skip"),
    "yaml": ("check", "skip"),
    # response: the reply of the HTTP request the shell block above it sends, compared by shape
    # with what a live server answers (tests/docs/exchanges.py, test_http_exchanges.py).
    "json": ("check", "response", "skip"),
    "sql": ("skip",),
    # check: its braces balance and every directive ends with ";" (no nginx on the test machine).
    "nginx": ("check", "skip"),
    # output: on a page followed step by step, what the run block above it prints (``...`` elides).
    "text": ("text", "output"),
}
FLAGS = {"continues", "append", "restart", "http-error"}


class SampleError(Exception):
    """A block the extractor cannot place: no language, an unknown kind, a skip without a reason."""


@dataclass
class Sample:
    page: str  # relative to the repository
    line: int  # of the opening fence
    lang: str
    code: str
    kind: str
    flags: set[str] = field(default_factory=set)
    options: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    prelude: str = ""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def page_mode(path: Path) -> str:
    """``workspace`` for a page followed step by step in a new project (the tutorial), else ``project``."""
    outside_blocks = re.sub(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", "", path.read_text(), flags=re.MULTILINE | re.DOTALL)
    match = PAGE_DIRECTIVE.search(outside_blocks)
    return match["mode"] if match else "project"


def _directive(lines: list[str], fence_index: int) -> tuple[str, str]:
    """The ``<!-- sample: ... -->`` comment ending on the line above the fence: (head, prelude)."""
    end = fence_index - 1
    if end < 0 or not lines[end].rstrip().endswith("-->"):
        return "", ""
    start = end
    while start >= 0 and "<!--" not in lines[start]:
        start -= 1
    match = DIRECTIVE.search(textwrap.dedent("\n".join(lines[start : end + 1])))
    if not match:
        return "", ""
    return match["head"].strip(), (match["prelude"] or "").strip("\n")


def _parse_head(head: str, lang: str, where: str) -> tuple[str, set[str], dict[str, str], str]:
    words, _, reason = head.partition(" -- ")
    if words.strip() == "skip" and not reason.strip():
        raise SampleError(f"{where}: a skipped sample says why: <!-- sample: skip -- the reason -->")
    kind, flags, options = KINDS[lang][0], set(), {}
    for word in shlex.split(words):
        if "=" in word:
            name, _, value = word.partition("=")
            options[name] = value
            if name == "file":
                kind = "file"
        elif word in FLAGS:
            flags.add(word)
        elif word in KINDS[lang]:
            kind = word
        else:
            raise SampleError(f"{where}: {word!r} is no kind of {lang} sample ({', '.join(KINDS[lang])}) nor a flag")
    return kind, flags, options, reason.strip()


def samples_of(path: Path) -> Iterator[Sample]:
    lines = path.read_text().splitlines()
    page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        where = f"{page}:{index + 1}"
        if end == len(lines):
            raise SampleError(f"{where}: the block is never closed")
        lang = info.split()[0] if info else ""
        if lang not in KINDS:
            raise SampleError(
                f"{where}: a block names its language, one of {', '.join(KINDS)} (text for output and diagrams), not {info!r}"
            )
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[index + 1 : end]]
        head, prelude = _directive(lines, index)
        kind, flags, options, reason = _parse_head(head, lang, where)
        yield Sample(page, index + 1, lang, "\n".join(body) + "\n", kind, flags, options, reason, prelude)
        index = end + 1


def all_samples() -> list[Sample]:
    return [sample for path in pages() for sample in samples_of(path)]


# -- Shell commands -----------------------------------------------------------

SEPARATORS = {"&&", "||", ";", "|", "(", ")", "&", ";;"}


def strip_comments(script: str) -> str:
    """The script without its comments (a ``#`` starting a word outside quotes, to the end of its line)."""
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(script):
        char = script[index]
        if quote:
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"':
                out.append(char)
                index += 1
                char = script[index] if index < len(script) else ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or script[index - 1] in " \t\n;(|&"):
            while index < len(script) and script[index] != "\n":
                index += 1
            continue
        out.append(char)
        index += 1
    return "".join(out)


def commands(script: str) -> list[list[str]]:
    """The simple commands of a shell block, as words; comments, continuations and ``$(...)`` handled.

    Assignments before a command (``KEY=...``) are dropped; ``VAR=$(cmd ...)``
    yields ``cmd ...`` as a command of its own.
    """
    text = strip_comments(script).replace("\\\n", " ").replace("$(", " ( ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars="();&|\n")
    lexer.whitespace = " \t\r"  # a newline ends a command, outside quotes
    lexer.whitespace_split = True
    lexer.commenters = ""  # gone already: shlex would eat the newline that ends one
    found: list[list[str]] = []
    current: list[str] = []
    for token in [*lexer, ";"]:
        if token in SEPARATORS or set(token) <= set("();&|\n"):
            if current:
                found.append(current)
            current = []
            continue
        if not current and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):
            continue  # an assignment, or the variable a $(...) fills
        current.append(token)
    return found
