"""``OJS["DEFAULT_RETRY"]`` is parsed once until the setting changes, not on every PUSH and enqueue."""

from __future__ import annotations

from django.test import override_settings

from django_ojs.conf import ojs_settings


def test_the_default_retry_policy_is_parsed_once_until_the_setting_changes():
    policy = ojs_settings.retry_policy()
    assert ojs_settings.retry_policy() is policy
    assert policy.on_exhaustion == "dead_letter"  # the stock default, over ojs-retry §8's
    with override_settings(OJS={"DEFAULT_RETRY": {"max_attempts": 7}}):
        changed = ojs_settings.retry_policy()
        assert (changed.max_attempts, changed.on_exhaustion) == (7, "dead_letter")
        assert ojs_settings.retry_policy() is changed
    assert ojs_settings.retry_policy() == policy
