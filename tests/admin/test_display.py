"""How the console writes times, ids and names: one format each, on every page."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from django_ojs.admin.display import breakable, id_cell, moment, short_id, timestamp
from django_ojs.models import Worker
from django_ojs.protocol.states import WorkerState

NOW = dt.datetime(2026, 11, 27, 10, 4, 5, 123000, tzinfo=dt.UTC)


def test_a_moment_is_utc_to_the_second_with_its_distance_beside_it():
    paris = dt.timezone(dt.timedelta(hours=1))
    three_minutes_ago = (NOW - dt.timedelta(minutes=3, seconds=12)).astimezone(paris)
    assert timestamp(three_minutes_ago) == "2026-11-27 10:00:53Z"
    assert moment(three_minutes_ago, NOW) == (
        '<time class="ojs-moment" datetime="2026-11-27T10:00:53.123Z" title="2026-11-27T10:00:53.123Z">'
        '2026-11-27 10:00:53Z</time> <span class="ojs-ago">(3 min ago)</span>'
    )
    # Compact: the distance alone, the time in the same format on hover.
    assert moment(NOW + dt.timedelta(hours=5, minutes=2), NOW, compact=True) == (
        '<time class="ojs-moment" datetime="2026-11-27T15:06:05.123Z" title="2026-11-27 15:06:05Z">in 5 h</time>'
    )
    assert "(now)" in moment(NOW, NOW)
    assert moment(None, NOW) == "—"


def test_a_uuid7_is_shown_by_its_random_end():
    # Two jobs made in the same minute share their first 8 characters (the clock).
    first, second = "01a21aab-69ca-7e6e-8e64-eefacddd31a2", "01a21aab-69cb-7261-8abc-ceffab9da8e9"
    assert (short_id(first), short_id(second)) == ("…cddd31a2", "…ab9da8e9")
    assert short_id("web-1-4242") == "web-1-4242"
    assert short_id("worker-on-a-host-with-a-long-name") == "worker-o…ong-name"


def test_an_id_cell_links_the_short_id_and_copies_the_whole():
    cell = id_cell("01a21aab-69ca-7e6e-8e64-eefacddd31a2", "/admin/django_ojs/job/7/change/")
    assert '<a href="/admin/django_ojs/job/7/change/"><code class="ojs-id" title="01a21aab-69ca-7e6e-8e64-eefacddd31a2">…cddd31a2</code></a>' in cell
    assert 'data-ojs-copy="01a21aab-69ca-7e6e-8e64-eefacddd31a2"' in cell


def test_a_name_breaks_at_its_parts_and_stays_escaped():
    assert breakable("billing.invoice_render") == "billing.<wbr>invoice_<wbr>render"
    assert breakable("<b>x.y") == "&lt;b&gt;x.<wbr>y"


@pytest.mark.django_db
def test_a_draining_worker_is_calm_and_no_directive_reads_with_a_stray_space(admin_client, make_worker):
    draining = make_worker("w-draining")
    Worker.objects.beat(draining.pk, state=WorkerState.TERMINATE)
    asked = make_worker("w-asked")
    Worker.objects.filter(pk=asked.pk).update(directive=WorkerState.QUIET, directive_set_at=None)

    rows = admin_client.get(reverse("admin:django_ojs_worker_live")).json()["rows"]

    assert 'class="ojs-worker ojs-worker-draining" title="reported terminate: ' in rows["w-draining"]["reported_state"]
    assert ">draining</span>" in rows["w-draining"]["reported_state"]
    assert "no job left, exiting" in rows["w-draining"]["reported_state"]
    assert "none: draining" in rows["w-draining"]["directive_status"]
    assert "requested, not applied yet" in rows["w-asked"]["directive_status"]


@pytest.mark.django_db
def test_a_worker_quiet_on_its_own_was_asked_nothing(admin_client, make_worker):
    # SIGTSTP: the worker reports quiet; no operator set a directive, so none is pending.
    stopped = make_worker("w-tstp")
    Worker.objects.beat(stopped.pk, state=WorkerState.QUIET)
    resumed = make_worker("w-resumed")
    Worker.objects.beat(resumed.pk, state=WorkerState.QUIET)
    Worker.objects.set_directive([resumed.pk], WorkerState.RUNNING)  # an operator's resume, not applied yet

    rows = admin_client.get(reverse("admin:django_ojs_worker_live")).json()["rows"]

    assert ">quiet</span>" in rows["w-tstp"]["reported_state"]
    assert "not applied yet" not in rows["w-tstp"]["directive_status"]
    assert "none: quiet on its own" in rows["w-tstp"]["directive_status"]
    assert "running" in rows["w-resumed"]["directive_status"]
    assert "not applied yet" in rows["w-resumed"]["directive_status"]
