"""The level 4 pages of the console: cron schedules, queue configuration, rate limits,
and a job's unique key and rate limit."""

from __future__ import annotations

import pytest
from django.urls import reverse

from django_ojs.core import limits, queue_config
from django_ojs.models import CronJob, Job, Queue
from django_ojs.protocol.cron_jobs import CronSpec

from .conftest import staff_with

pytestmark = pytest.mark.django_db


def register_cron(name: str = "nightly", **overrides) -> CronJob:
    spec = CronSpec(name=name, expression="0 3 * * *", timezone="UTC",
                    job_template={"type": "report.build", "args": []}, overlap_policy="skip",
                    enabled=True, description="")
    for field, value in overrides.items():
        setattr(spec, field, value)
    return CronJob.objects.register(spec)[0]


def run_action(client, model: str, action: str, pks: list[str]):
    return client.post(reverse(f"admin:django_ojs_{model}_changelist"),
                       {"action": action, "_selected_action": pks}, follow=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_the_cron_page_lists_next_and_last_fire_and_overlap(admin_client):
    register_cron()
    page = admin_client.get(reverse("admin:django_ojs_cronjob_changelist")).content.decode()
    assert "nightly" in page and "0 3 * * *" in page and "03:00:00Z" in page and "skip" in page and "never" in page


def test_cron_actions_disable_enable_and_fire_now(admin_client):
    cron = register_cron()
    done = run_action(admin_client, "cronjob", "disable_schedules", [cron.name])
    assert messages_of(done) == ["Disable: 1 done."]
    assert CronJob.objects.get(name="nightly").next_run_at is None
    again = run_action(admin_client, "cronjob", "disable_schedules", [cron.name])
    assert messages_of(again) == ["Disable: 0 done, 1 skipped because: already disabled (1)."]
    run_action(admin_client, "cronjob", "enable_schedules", [cron.name])
    enabled = CronJob.objects.get(name="nightly")
    assert enabled.enabled and enabled.next_run_at is not None

    fired = run_action(admin_client, "cronjob", "fire_now", [cron.name])
    assert messages_of(fired) == ["Fire now: 1 done."]
    job = Job.objects.get(cron_name="nightly")
    assert job.type == "report.build" and CronJob.objects.get(name="nightly").next_run_at == enabled.next_run_at
    # Overlap policy "skip": the first run has not finished.
    skipped = run_action(admin_client, "cronjob", "fire_now", [cron.name])
    assert "0 done, 1 skipped" in messages_of(skipped)[0]


def test_the_cron_page_says_when_an_operator_has_switched_a_code_schedule(admin_client):
    CronJob.objects.sync_from_code([CronSpec(name="digest", expression="0 * * * *", timezone="UTC",
                                             job_template={"type": "report.build", "args": []})])
    url = reverse("admin:django_ojs_cronjob_changelist")
    assert "declared in code" in admin_client.get(url).content.decode()
    run_action(admin_client, "cronjob", "disable_schedules", ["digest"])
    page = admin_client.get(url).content.decode()
    assert "disabled</span> <span" in page and "here; the code declares it enabled" in page


def test_a_viewer_sees_the_cron_page_but_cannot_act(client):
    client.force_login(staff_with(["view_cronjob"], "viewer"))
    register_cron()
    page = client.get(reverse("admin:django_ojs_cronjob_changelist"))
    assert page.status_code == 200 and "fire_now" not in page.content.decode()


def test_the_queue_page_configures_limits_and_bound(admin_client, push):
    push(options={"queue": "mail"})
    url = reverse("admin:django_ojs_queue_configure", args=["mail"])
    assert admin_client.get(url).status_code == 200
    saved = admin_client.post(url, {"concurrency": "5", "rate_limit": "60", "rate_period": "PT1M",
                                    "throttle": "", "throttle_period": "PT1S", "max_size": "1000",
                                    "overflow_policy": "drop_oldest"}, follow=True)
    assert messages_of(saved) == ["Configure mail: done."]
    queue = Queue.objects.get(name="mail")
    assert (queue.concurrency, queue.rate_limit, queue.throttle, queue.max_size, queue.overflow_policy) == (
        5, {"limit": 60, "period": "PT1M"}, None, 1000, "drop_oldest")
    listing = admin_client.get(reverse("admin:django_ojs_queue_changelist")).content.decode()
    assert "0 / 5 active; rate 60 per PT1M" in listing and "1,000 (drop_oldest)" in listing

    refused = admin_client.post(url, {"concurrency": "", "rate_limit": "5", "rate_period": "soon",
                                      "overflow_policy": "reject"})
    assert refused.status_code == 200 and "rate_limit.period" in refused.content.decode()
    assert Queue.objects.get(name="mail").concurrency == 5  # unchanged


def test_the_queue_page_makes_a_queue_fair_and_refuses_a_key_that_is_no_path(admin_client, push):
    push(meta={"tenant": "acme"}, options={"queue": "mail"})
    url = reverse("admin:django_ojs_queue_configure", args=["mail"])
    form = {"concurrency": "", "rate_limit": "", "rate_period": "PT1M", "throttle": "", "throttle_period": "PT1S",
            "max_size": "", "overflow_policy": "reject"}
    saved = admin_client.post(url, {**form, "fairness_key": "meta.tenant"}, follow=True)
    assert messages_of(saved) == ["Configure mail: done."]
    assert Queue.objects.get(name="mail").fairness_key == "meta.tenant"
    assert Job.objects.get(queue="mail").fair_key == "acme"  # the waiting job takes its turn by its value
    assert "fair by meta.tenant" in admin_client.get(reverse("admin:django_ojs_queue_changelist")).content.decode()

    weighted = admin_client.post(url, {**form, "fairness_key": "meta.tenant", "fairness_weights": '{"acme": 3}',
                                       "fairness_default_weight": "2"}, follow=True)
    assert messages_of(weighted) == ["Configure mail: done."]
    assert (Queue.objects.get(name="mail").fairness_weights, Queue.objects.get(name="mail").fairness_default_weight) == (
        {"acme": 3}, 2)
    assert admin_client.get(url).context["form"]["fairness_weights"].value() == '{"acme": 3}'
    listing = admin_client.get(reverse("admin:django_ojs_queue_changelist")).content.decode()
    assert "fair by meta.tenant (weights acme 3; others 2)" in listing
    for bad, message in (("{acme: 3}", "must be a JSON object"), ('{"acme": 0}', "from 1 to 1000"),
                         ('{"\\u0000": 2}', "without NUL"), ('{"\\ud800": 2}', "unpaired surrogates")):
        refused = admin_client.post(url, {**form, "fairness_key": "meta.tenant", "fairness_weights": bad})
        assert refused.status_code == 200 and message in refused.content.decode()
    assert Queue.objects.get(name="mail").fairness_weights == {"acme": 3}  # unchanged

    refused = admin_client.post(url, {**form, "fairness_key": "tenant"})
    assert refused.status_code == 200 and "fairness_key must be null, meta.&lt;name&gt;" in refused.content.decode()
    assert Queue.objects.get(name="mail").fairness_key == "meta.tenant"  # unchanged


def test_a_viewer_cannot_change_a_queues_configuration(client, push):
    client.force_login(staff_with(["view_queue"], "viewer"))
    push(options={"queue": "mail"})
    url = reverse("admin:django_ojs_queue_configure", args=["mail"])
    assert client.get(url).status_code == 200
    assert client.post(url, {"concurrency": "1", "overflow_policy": "reject"}).status_code == 403
    assert Queue.objects.get(name="mail").concurrency is None


def test_the_rate_limits_page_shows_usage_and_sets_and_clears_overrides(admin_client, push):
    push(options={"queue": "s", "rate_limit": {"key": "stripe-api", "concurrency": 2}})
    queue_config.update("mail", {"rate_limit": {"limit": 10, "period": "PT1M"}})
    url = reverse("admin:django_ojs_ratelimitoverride_changelist")
    page = admin_client.get(url).content.decode()
    assert "stripe-api" in page and "0 / 2" in page and "queue:mail" in page and "0 / 10 per PT1M" in page

    set_ = admin_client.post(url, {"key": "stripe-api", "concurrency": "0", "rate_period": "PT1M"}, follow=True)
    assert messages_of(set_) == ["Override of stripe-api: done."]
    assert limits.inspect("stripe-api")["concurrency"]["limit"] == 0
    cleared = admin_client.post(url, {"clear": "stripe-api"}, follow=True)
    assert messages_of(cleared) == ["Clear override of stripe-api: done."]
    assert limits.inspect("stripe-api")["concurrency"]["limit"] == 2


def test_a_jobs_page_shows_its_unique_key_and_the_job_it_collides_with(admin_client, push):
    first = push(type="u.job", args=[1], options={"unique": {"keys": ["args"]}, "rate_limit": {"key": "k1", "concurrency": 1}})
    Job.objects.cancel(first.id)
    holder = push(type="u.job", args=[1], options={"unique": {"keys": ["args"]}})
    page = admin_client.get(reverse("admin:django_ojs_job_change", args=[first.seq])).content.decode()
    assert first.unique_key in page and "does not hold the key" in page
    assert str(holder.id) in page and "k1" in page
    own = admin_client.get(reverse("admin:django_ojs_job_change", args=[holder.seq])).content.decode()
    assert "holds the key while" in own
