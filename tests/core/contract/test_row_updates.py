"""core.row_updates.update_rows: the batch write of loaded rows the settles, the reaper and workflows use."""

from __future__ import annotations

import pytest

import django_ojs
from django_ojs.core import partitions
from django_ojs.core.row_updates import update_rows
from django_ojs.models import Job, WorkflowNode


def test_it_writes_each_rows_fields_and_only_the_rows_the_filter_admits(db):
    first, second, third = (django_ojs.enqueue("rows.write", [n], queue="rows") for n in range(3))
    Job.objects.filter(id=third.id).update(state="cancelled")  # outside the live jobs' states
    for job, priority in ((first, 7), (second, -3), (third, 9)):
        job.priority, job.error = priority, {"n": priority}
    update_rows(partitions.live_jobs(), [first, second, third], ["priority", "error"])
    stored = {job.id: (job.priority, job.error) for job in Job.objects.filter(queue="rows")}
    assert stored[first.id] == (7, {"n": 7})
    assert stored[second.id] == (-3, {"n": -3})
    assert stored[third.id] == (0, None)  # the filter kept it out
    assert Job.objects.get(id=third.id).state == "cancelled"


def test_none_is_stored_as_null_and_nothing_to_write_sends_nothing(db, django_assert_num_queries):
    job = django_ojs.enqueue("rows.null", [], queue="rows")
    job.error = {"was": "set"}
    update_rows(Job.objects.all(), [job], ["error"])
    assert Job.objects.filter(id=job.id, error__isnull=False).exists()
    job.error = None
    update_rows(Job.objects.all(), [job], ["error"])
    assert Job.objects.filter(id=job.id, error__isnull=True).exists()  # SQL NULL, not JSON null
    with django_assert_num_queries(0):
        update_rows(Job.objects.all(), [], ["error"])


def test_a_filter_across_a_join_is_refused(db):
    with pytest.raises(ValueError, match="own table"):
        update_rows(WorkflowNode.objects.filter(workflow__state="running"), [WorkflowNode(pk=1)], ["state"])
