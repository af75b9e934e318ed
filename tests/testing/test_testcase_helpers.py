"""django_ojs.testing with Django's TestCase: OJSTestMixin, or enterContext(manual())."""

from __future__ import annotations

from django.test import TestCase

import django_ojs
from django_ojs import testing
from django_ojs.models import Job

from . import jobs_under_test as handlers


class ManualModeTests(testing.OJSTestMixin, TestCase):
    def test_assert_then_drain(self):
        handlers.welcome.enqueue("tc@example.com")
        self.ojs.assert_enqueued("tt.welcome", args=["tc@example.com"], queue="email")
        self.assertEqual(Job.objects.get().state, "available")
        self.ojs.drain(queue="email")
        self.ojs.assert_completed("tt.welcome")

    def test_each_test_starts_empty(self):
        self.assertEqual(self.ojs.enqueued_jobs(), [])
        self.assertFalse(Job.objects.exists())


class InlineModeTests(testing.OJSTestMixin, TestCase):
    ojs_mode = "inline"

    def test_enqueue_runs_at_once(self):
        job = django_ojs.enqueue("tt.welcome", ["inline@example.com"])
        self.assertEqual(job.state, "completed")
        self.assertEqual(job.result["sent_to"], "inline@example.com")


class EnterContextTests(TestCase):
    def setUp(self):
        self.jobs = self.enterContext(testing.manual())

    def test_with_enter_context(self):
        handlers.welcome.enqueue("ctx@example.com")
        testing.assert_enqueued("tt.welcome", args=["ctx@example.com"])
