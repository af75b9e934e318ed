"""Job search terms, shared by the admin's search box and ``manage.py ojs --search``.

Each kind of term is answered from an index on PostgreSQL:

- a UUID finds that job (the unique index on ``id``);
- ``args:<JSON>`` finds jobs whose arguments contain the JSON fragment: an
  array is matched as a sub-list (``args:[42, "en"]``), any other value as
  one argument (``args:"alice@example.com"``, ``args:{"user_id": 42}``, an
  object argument holding at least these entries);
- ``args.<key>=<value>`` (or ``:``) finds jobs with an object argument whose
  ``key`` (a dotted path: ``args.user.id=7``) is ``value``, read as a
  string or as the number/boolean/null it spells;
- ``key:value`` (or ``key=value``) finds jobs whose meta has that entry;
- anything else is matched as an exact type (``ojs_job_type``) or as the
  value of one of ``OJS["ADMIN_SEARCH_META_KEYS"]`` (tenant id, correlation
  id by default).

Args and meta are matched by JSON containment (``args @> '[{"user_id": 42}]'``),
which the GIN indexes ``ojs_job_args`` and ``ojs_job_meta`` (``jsonb_path_ops``)
serve on PostgreSQL; a substring search (Django's default ``icontains``)
would read every row of the table. SQLite has neither containment nor GIN:
there the same terms are answered by ``json_each`` over every row, with one
difference: an array nested inside an argument must match exactly.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL

from ..conf import ojs_settings
from ..models import Job
from ..protocol.errors import InvalidRequest, OJSError
from ..protocol.storable import UNSTORABLE, check_storable, reject_constant

HELP_TEXT = (
    "A job id, an exact type (email.send), a tenant or correlation id, any meta entry as key:value, "
    'or inside the arguments: args.user_id=42 or a JSON fragment such as args:{"user_id": 42}.'
)
_META_ENTRY = re.compile(r"(?P<key>[\w.\-]+)\s*[:=]\s*(?P<value>.+)", re.DOTALL)
_ARGS_FRAGMENT = re.compile(r"args\s*:\s*(?P<fragment>[\[{\"\d\-tfn].*)", re.DOTALL)
_ARGS_ENTRY = re.compile(r"args\.(?P<path>[\w\-]+(?:\.[\w\-]+)*)\s*[:=]\s*(?P<value>.+)", re.DOTALL)


def job_search(term: str) -> Q | None:
    """The condition a search term stands for; None for an empty term.

    A malformed ``args:`` fragment raises ``InvalidRequest``.
    """
    term = term.strip()
    if not term:
        return None
    if UNSTORABLE.search(term):
        raise InvalidRequest("the search holds a NUL character or an unpaired surrogate", field="search")
    try:
        return Q(id=uuid.UUID(term))
    except ValueError:
        pass
    fragment = _ARGS_FRAGMENT.fullmatch(term)
    if fragment:
        return args_contain(_parse_fragment(fragment["fragment"]))
    entry = _ARGS_ENTRY.fullmatch(term)
    if entry:
        path = entry["path"].split(".")
        return _any_of(args_contain([_nest(path, value)]) for value in _spellings(entry["value"].strip()))
    entry = _META_ENTRY.fullmatch(term)
    if entry:
        return meta_has(entry["key"], entry["value"].strip())
    condition = Q(type=term)
    for key in ojs_settings.ADMIN_SEARCH_META_KEYS:
        condition |= meta_has(key, term)
    return condition


def meta_has(key: str, value: str) -> Q:
    """meta[key] equals ``value``, as a string or as the JSON number/boolean it spells."""
    condition = Q()
    for candidate in _spellings(value):
        if connection.vendor == "postgresql":
            # Spelled out so the planner can use the partial index (WHERE meta <> '{}'),
            # which it cannot infer from the containment alone.
            condition |= Q(meta__contains={key: candidate}) & ~Q(meta={})
        else:
            # SQLite has no containment lookup (nor a GIN index to serve one).
            condition |= Q(**{f"meta__{key}": candidate})
    return condition


def args_contain(fragment: Any) -> Q:
    """The job's arguments contain ``fragment``: a list of arguments, or one argument."""
    wanted = fragment if isinstance(fragment, list) else [fragment]
    if connection.vendor == "postgresql":
        # ``args <> '[]'`` lets the planner use the partial index ojs_job_args.
        return Q(args__contains=wanted) & ~Q(args=[])
    return Q(_sqlite_contains(wanted))


def _parse_fragment(text: str) -> Any:
    try:
        return _storable_json(text)
    except (ValueError, OJSError) as exc:
        raise InvalidRequest(f"args:{text} is not JSON a job could hold: {exc}", field="search") from None


def _spellings(value: str) -> list[Any]:
    """``value`` as a string, and as the JSON scalar it spells if it spells one ("42", "true")."""
    candidates: list[Any] = [value]
    try:
        parsed = _storable_json(value)
    except (ValueError, OJSError):
        return candidates
    if parsed != value and (parsed is None or isinstance(parsed, (int, float, bool))):
        candidates.append(parsed)
    return candidates


def _storable_json(text: str) -> Any:
    """``text`` as JSON a job could hold: Python's parser also reads NaN and Infinity, a number past a
    float's range (``1e999``) and escapes of a NUL or a lone surrogate, each of which PostgreSQL's
    jsonb refuses with an error (a 500). ``ValueError`` (no JSON) or ``OJSError`` (unstorable) instead."""
    value = json.loads(text, parse_constant=reject_constant)
    check_storable(value, where="search")
    return value


def _nest(path: list[str], value: Any) -> dict[str, Any]:
    nested: Any = value
    for key in reversed(path):
        nested = {key: nested}
    return nested


def _any_of(conditions: Any) -> Q:
    combined = Q()
    for condition in conditions:
        combined |= condition
    return combined


# -- SQLite: containment spelled with json_each -------------------------------------

def _sqlite_contains(wanted: list[Any]) -> RawSQL:
    """Each wanted argument matches some argument of the job (``@>`` on a list).

    Paths are read from the row's own column (``a.fullkey`` is the
    argument's path, ``$[i]``): ``json_each``'s ``value`` of a string is
    bare text, not JSON, so it cannot be read as JSON again.
    """
    column = f'"{Job._meta.db_table}"."args"'
    clauses, params = [], []
    for item in wanted:
        match, item_params = _sqlite_match(column, item, "")
        clauses.append(f"EXISTS (SELECT 1 FROM json_each({column}) AS a WHERE {match})")
        params += item_params
    return RawSQL(" AND ".join(clauses) or "1", params, output_field=BooleanField())


def _sqlite_match(column: str, item: Any, suffix: str) -> tuple[str, list[Any]]:
    """SQL true when the JSON at ``a.fullkey || suffix`` of ``column`` contains ``item``.

    Paths go as parameters, never into the SQL text.
    """
    path = "a.fullkey || ?"
    typed = f"json_type({column}, {path})"
    extracted = f"json_extract({column}, {path})"
    if isinstance(item, dict):
        clauses, params = [f"{typed} = 'object'"], [suffix]
        for key, value in item.items():
            clause, sub_params = _sqlite_match(column, value, f'{suffix}."{_quote_key(key)}"')
            clauses.append(clause)
            params += sub_params
        return " AND ".join(clauses), params
    if item is None:
        return f"{typed} = 'null'", [suffix]
    if isinstance(item, bool):
        return f"{typed} = ?", [suffix, "true" if item else "false"]
    if isinstance(item, (int, float)):
        return f"{typed} IN ('integer', 'real') AND {extracted} = ?", [suffix, suffix, item]
    if isinstance(item, str):
        return f"{typed} = 'text' AND {extracted} = ?", [suffix, suffix, item]
    # A nested array: exact match of its JSON text.
    return f"json({extracted}) = json(?)", [suffix, json.dumps(item)]


def _quote_key(key: str) -> str:
    return str(key).replace("\\", "\\\\").replace('"', '\\"')
