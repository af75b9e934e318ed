"""Who may cancel, on the wire (ojs-security §7.5: operators and admins, not producers): the ``cancel`` scope."""

from __future__ import annotations

import json

import pytest

from django_ojs.keys import SCOPES_EXPLAINED
from tests.api.gunicorn import Wire, serving
from tests.api.test_key_expiry import create_key

GROUP = {"type": "group", "jobs": [{"type": "a", "args": [], "options": {"queue": "later"}}]}


@pytest.fixture
def server(transactional_db):
    with serving("") as client:
        yield client


def keyed(server: Wire, *scopes: str) -> Wire:
    """A client of ``server`` whose key holds ``scopes``, made as an operator makes it (``ojs_create_api_key``)."""
    options = [option for scope in scopes for option in ("--scope", scope)]
    return Wire(server.port, create_key("+".join(scopes), *options, "--quiet")[0].strip())


def made(client: Wire, path: str, body: dict) -> str:
    status, _, answer = client.send("POST", path, body)
    assert status == 201, answer
    created = json.loads(answer)
    return (created.get("job") or created["workflow"])["id"]


def state(client: Wire, path: str) -> str:
    status, _, answer = client.send("GET", path)
    assert status == 200, answer
    reply = json.loads(answer)
    return (reply.get("job") or reply["workflow"])["state"]


def test_a_producers_key_may_not_cancel_a_job_or_a_workflow_and_nothing_changes(server):
    producer = keyed(server, "enqueue")
    job = f"/ojs/v1/jobs/{made(producer, '/ojs/v1/jobs', {'type': 'a', 'args': [], 'options': {'queue': 'later'}})}"
    workflow = f"/ojs/v1/workflows/{made(producer, '/ojs/v1/workflows', GROUP)}"
    for path in (job, workflow):
        status, headers, answer = producer.send("DELETE", path)
        assert status == 403, answer
        assert headers["Content-Type"] == "application/openjobspec+json"
        error = json.loads(answer)["error"]
        assert error["code"] == "forbidden"
        assert error["details"] == {"required_scope": "cancel", "key_scopes": ["enqueue"]}
        assert "lacks the 'cancel' scope" in error["message"]
    assert state(producer, job) == "available"
    assert state(producer, workflow) == "running"


@pytest.mark.parametrize("scopes", [("enqueue", "cancel"), ("read", "cancel"), ("admin",)])
def test_a_key_holding_cancel_cancels_a_job_and_a_workflow_it_did_not_make(server, scopes):
    producer = keyed(server, "enqueue")
    job = made(producer, "/ojs/v1/jobs", {"type": "a", "args": [], "options": {"queue": "later"}})
    workflow = made(producer, "/ojs/v1/workflows", GROUP)
    canceller = keyed(server, *scopes)
    status, _, answer = canceller.send("DELETE", f"/ojs/v1/jobs/{job}")
    assert status == 200 and json.loads(answer)["job"]["state"] == "cancelled", answer
    status, _, answer = canceller.send("DELETE", f"/ojs/v1/workflows/{workflow}")
    assert status == 200 and json.loads(answer)["workflow"]["state"] == "cancelled", answer


def test_the_admin_apis_cancels_stay_admin_only(server):
    producer, operator = keyed(server, "enqueue"), keyed(server, "read", "cancel")
    job = made(producer, "/ojs/v1/jobs", {"type": "a", "args": [], "options": {"queue": "later"}})
    for path, body in ((f"/ojs/v1/admin/jobs/{job}/cancel", {}),
                       ("/ojs/v1/admin/jobs/bulk/cancel", {"filter": {"queue": "later"}, "confirm": True})):
        status, _, answer = operator.send("POST", path, body)
        assert status == 403, answer
        assert json.loads(answer)["error"]["details"]["required_scope"] == "admin"
    assert state(producer, f"/ojs/v1/jobs/{job}") == "available"


def test_the_command_and_the_admin_form_say_the_same_of_each_scope():
    from django_ojs.admin.keys import ApiKeyCreationForm
    from django_ojs.management.commands.ojs_create_api_key import Command

    command_help = " ".join(Command().create_parser("manage.py", "ojs_create_api_key").format_help().split())
    assert SCOPES_EXPLAINED in command_help and "{read,enqueue,cancel,worker,admin}" in command_help
    assert ApiKeyCreationForm().fields["scopes"].help_text == SCOPES_EXPLAINED
    assert "cancel: cancel a job or a workflow" in SCOPES_EXPLAINED and "push, activate" in SCOPES_EXPLAINED
