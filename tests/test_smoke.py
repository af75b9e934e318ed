"""A first end-to-end pass through the core and the HTTP door."""

from django_ojs.models import Job


def test_push_fetch_ack_round_trip(api):
    pushed = api.post("/ojs/v1/jobs", {"type": "email.send", "args": ["a@example.com"]})
    assert pushed.status_code == 201, pushed.content
    job_id = pushed.json()["job"]["id"]
    fetched = api.post("/ojs/v1/workers/fetch", {"queues": ["default"], "worker_id": "w1"})
    assert fetched.json()["jobs"][0]["id"] == job_id
    acked = api.post("/ojs/v1/workers/ack", {"job_id": job_id, "result": {"ok": True}})
    assert acked.status_code == 200, acked.content
    assert Job.objects.get(id=job_id).state == "completed"
