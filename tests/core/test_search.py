"""Job search (django_ojs/search.py): what each term finds, on PostgreSQL and SQLite, and
that on PostgreSQL args and meta terms read their GIN index instead of the table."""

from __future__ import annotations

import pytest
from django.db import connection

from django_ojs.core.search import job_search
from django_ojs.models import Job
from django_ojs.protocol.errors import InvalidRequest
from tests.core.pg.test_query_plans import plan_of, seq_scans
from tests.job_rows import insert_jobs


def found(term: str) -> set:
    return set(Job.objects.filter(job_search(term)).values_list("id", flat=True))


@pytest.fixture
def jobs(push):
    def make(args, **body):
        return push(type=body.pop("type", "mail.send"), args=args, **body).id

    return {
        "ada": make([{"to": "ada@example.com", "user": {"id": 7, "vip": True}, "tags": ["a", "b"]}, "en"]),
        "bob": make([{"to": "bob@example.com", "user": {"id": "7"}}, "fr"]),
        "num": make([42, "en", None]),
        "none": make([]),
        "meta": make([1], meta={"tenant_id": "acme"}),
    }


def test_key_value_finds_an_object_argument_by_a_dotted_path(jobs):
    assert found("args.to=ada@example.com") == {jobs["ada"]}
    assert found("args.to:bob@example.com") == {jobs["bob"]}
    # 7 spells a number and a string: both are found.
    assert found("args.user.id=7") == {jobs["ada"], jobs["bob"]}
    assert found("args.user.vip=true") == {jobs["ada"]}
    assert found("args.to=nobody@example.com") == set()


def test_a_json_fragment_is_matched_by_containment(jobs):
    assert found('args:{"user": {"id": 7}}') == {jobs["ada"]}
    assert found('args:{"user": {"id": "7"}}') == {jobs["bob"]}
    assert found('args:"en"') == {jobs["ada"], jobs["num"]}
    assert found("args:42") == {jobs["num"]}
    assert found('args:[42, "en"]') == {jobs["num"]}
    assert found('args:[42, "fr"]') == set()
    assert found("args:null") == {jobs["num"]}
    assert found('args:{"tags": ["a", "b"]}') == {jobs["ada"]}


def test_meta_and_type_terms_still_work(jobs):
    assert found("tenant_id:acme") == {jobs["meta"]}
    assert found("acme") == {jobs["meta"]}
    assert found("mail.send") == set(jobs.values())


@pytest.mark.parametrize("term", ["NaN", "Infinity", "-Infinity", "args.a=NaN", "args.0=Infinity", "tenant_id:NaN",
                                  "args.a=1e999", "tenant_id:1e999"])
def test_a_word_json_reads_but_no_job_can_hold_is_searched_as_text(jobs, term):
    """Python's JSON reads NaN, Infinity and 1e999 (as infinity); PostgreSQL's jsonb refuses them,
    and a search that spelled them as numbers was a 500. They are words: searched as text."""
    assert found(term) == set()


@pytest.mark.parametrize("term", ["args:[NaN]", "args:-Infinity", "args:1e999", 'args:{"a": 1e999}',
                                  'args:["\\u0000"]', 'args:["\\ud800"]', "mail\x00send", "\ud800"])
def test_a_fragment_or_term_no_job_could_hold_is_refused(db, term):
    with pytest.raises(InvalidRequest) as refused:
        found(term)
    assert refused.value.details["field"] == "search"


def test_a_malformed_fragment_is_refused_with_a_clear_message(db):
    with pytest.raises(InvalidRequest, match="is not JSON"):
        job_search("args:{oops")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("term", ["args.user_id=4242", 'args:{"user_id": 4242}', 'args:"ref-4242"'])
def test_an_args_search_reads_the_gin_index(term):
    insert_jobs(
        30_000,
        state="completed",
        args_sql="jsonb_build_array(jsonb_build_object('user_id', g, 'template', 'welcome'), 'ref-' || g)",
    )
    # As autovacuum leaves it: the GIN index's pending list (where fast
    # inserts wait) merged, and fresh statistics. A long pending list is
    # read on every search, and the planner rightly prefers a scan then.
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {Job._meta.db_table}")
    # As the admin's list asks it: newest first, one page.
    queryset = Job.objects.filter(job_search(term)).order_by("-seq").values("seq")[:50]
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        statement = cursor.mogrify(sql, params)
    if isinstance(statement, bytes):
        statement = statement.decode()
    plan = plan_of(statement)
    assert "ojs_job_args" in plan and not seq_scans(plan), plan
    assert len(queryset) == 1
