"""Shell samples that are not run are checked: every command exists, with the options it is given.

- ``manage.py COMMAND ...`` (``python manage.py``, ``django-admin``): parsed by the
  command's own argument parser, so an unknown command, subcommand or option fails;
- ``curl``: its URL is a route of the HTTP API that serves its method, and a
  JSON body parses (a body with ``...`` in it is an elision, not parsed);
- ``tox -e ENV``: ENV is in tox.ini; ``pip install ...[EXTRAS]``: the extras are pyproject's;
- ``gunicorn ...``: parsed by gunicorn's own argument parser (the app named is the reader's; a
  configuration file, the repository's or the ``gunicorn.conf.py`` serving.md gives);
- ``python -m MODULE`` / ``python PATH``: the module or file exists;
- a few programs a reader already has (``kill``, ``cd``, ``sleep``...) are taken as they are;
  anything else is reported, so that a new tool in the docs is met by a check.
"""

from __future__ import annotations

import configparser
import importlib.util
import io
import itertools
import json
import re
import tomllib
import uuid
from contextlib import redirect_stderr, redirect_stdout
from urllib.parse import urlsplit

from django.core.management import CommandError, ManagementUtility
from django.urls import Resolver404, resolve
from gunicorn.config import Config

from django_ojs.api.urls import unknown_endpoint

from .samples import ROOT

# Programs whose use in the docs needs no check beyond the shell's syntax.
PLAIN = {"cd", "kill", "sleep", "echo", "export", ".", "source", "sh", "mkdir", "git", "cat", "exec", "true"}
# Placeholders the docs write in URLs, and what stands in for them here.
PLACEHOLDERS = {"$ID": str(uuid.uuid4()), "$OJS": "", "${OJS}": "", "http://localhost:8000": "", "http://127.0.0.1:8000": ""}
# The configuration docs/how-to/serving.md gives the reader to save in their project
# (tests/docs/test_gunicorn_conf.py holds it to example_project/gunicorn.conf.py).
READERS_GUNICORN_CONF = "gunicorn.conf.py"
OPTIONS_WITH_VALUE = {"-X", "--request", "-H", "--header", "-d", "--data", "--data-raw", "--data-binary", "-o", "-w", "-u"}


def check(words: list[str]) -> list[str]:
    program, *args = words
    name = program.rsplit("/", 1)[-1]
    if name in PLAIN:
        return []
    if name == "manage.py":
        return manage(args)
    if name == "django-admin":
        return manage(args)
    if re.fullmatch(r"python(3(\.\d+)?)?", name):
        return python(args)
    if name in ("pip", "pip3"):
        return pip(args)
    if name == "tox":
        return tox(args)
    if name == "curl":
        return curl(args)
    if name == "gunicorn":
        return gunicorn(args)
    if name == "mkdocs":
        return [] if args[:1] in (["build"], ["serve"]) else [f"mkdocs {' '.join(args)}: build or serve"]
    return [f"{program}: not a program these checks know; add a check (tests/docs/shell_checks.py) or run the block"]


def python(args: list[str]) -> list[str]:
    if not args:
        return []
    if args[0] == "manage.py":
        return manage(args[1:])
    if args[0] == "-m" and len(args) > 1:
        module, rest = args[1], args[2:]
        if module == "pip":
            return pip(rest)
        if module == "tox":
            return tox(rest)
        if module == "venv":
            return []
        if importlib.util.find_spec(module) is None:
            return [f"python -m {module}: no such module"]
        return []
    if args[0] == "-c":
        return []
    if not (ROOT / args[0]).is_file():
        return [f"python {args[0]}: no such file in the repository"]
    return []


def manage(args: list[str]) -> list[str]:
    """Parse ``manage.py ARGS`` with the command's own parser, without running it."""
    if not args:
        return ["manage.py without a command"]
    utility = ManagementUtility(["manage.py", *args])
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            command = utility.fetch_command(args[0])
            command.create_parser("manage.py", args[0]).parse_args(args[1:])
    except CommandError as exc:
        return [f"manage.py {' '.join(args)}: {exc}"]
    except SystemExit:
        message = (err.getvalue() or out.getvalue()).strip().splitlines()
        return [f"manage.py {' '.join(args)}: {message[-1] if message else 'rejected'}"]
    return []


def pyproject_extras() -> set[str]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return set(tomllib.load(file)["project"]["optional-dependencies"])


def pip(args: list[str]) -> list[str]:
    if not args or args[0] != "install":
        return [f"pip {' '.join(args)}: only pip install is expected in the docs"]
    problems = []
    for word in args[1:]:
        if word.startswith("-"):
            continue
        match = re.fullmatch(r"(?P<name>[\w.\-/]+)(\[(?P<extras>[^\]]*)\])?", word)
        if not match:
            problems.append(f"pip install {word}: not a requirement")
            continue
        if match["name"] in ("django-ojs", ".") and match["extras"]:
            unknown = set(match["extras"].split(",")) - pyproject_extras()
            if unknown:
                problems.append(f"pip install {word}: no such extra {sorted(unknown)} in pyproject.toml")
    return problems


def tox_environments() -> set[str]:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    listed = set(tox["tox"]["env_list"].split())
    return listed | {section.removeprefix("testenv:") for section in tox.sections() if section.startswith("testenv:")}


def tox(args: list[str]) -> list[str]:
    problems = []
    for flag, value in itertools.pairwise(args):
        if flag == "-e":
            problems += [f"tox -e {env}: no such environment in tox.ini" for env in value.split(",") if env not in tox_environments()]
    return problems


def gunicorn(args: list[str]) -> list[str]:
    """Parse ``gunicorn ARGS`` with gunicorn's own parser; a config file named must be in the repository."""
    parser = Config().parser()
    err = io.StringIO()
    try:
        with redirect_stderr(err):
            parsed = parser.parse_args(args)
    except SystemExit:
        message = err.getvalue().strip().splitlines()
        return [f"gunicorn {' '.join(args)}: {message[-1] if message else 'rejected'}"]
    if parsed.config and parsed.config != READERS_GUNICORN_CONF and not (ROOT / parsed.config).is_file():
        return [f"gunicorn -c {parsed.config}: no such file in the repository, nor the one serving.md gives"]
    return []


def curl(args: list[str]) -> list[str]:
    method, url, body = "GET", None, None
    words = iter(args)
    for word in words:
        if word in OPTIONS_WITH_VALUE:
            value = next(words, "")
            if word in ("-X", "--request"):
                method = value
            elif word.startswith(("-d", "--data")):
                body = value
                method = "POST" if method == "GET" else method
        elif word == "...":
            continue
        elif not word.startswith("-"):
            url = word
    if url is None:
        return [] if "..." in args else ["curl without a URL"]
    path = url
    for placeholder, value in PLACEHOLDERS.items():
        path = path.replace(placeholder, value)
    path = urlsplit(path).path
    problems = []
    try:
        match = resolve(path, urlconf="django_ojs.urls")
    except Resolver404:
        return [f"curl {url}: no such route in the HTTP API"]
    if match.func is unknown_endpoint:  # the catch-all that answers 404 in the binding's error format
        return [f"curl {url}: no such route in the HTTP API"]
    view = getattr(match.func, "view_class", None) or getattr(match.func, "cls", None)
    if view is not None and not hasattr(view, method.lower()):
        problems.append(f"curl -X {method} {url}: the route does not serve {method}")
    if body is not None and "..." not in body:
        try:
            json.loads(body)
        except ValueError as exc:
            problems.append(f"curl {url}: the body is not JSON ({exc})")
    return problems
