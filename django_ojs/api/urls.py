"""The OJS HTTP binding's routes: ``/ojs/manifest`` and ``/ojs/v1/...`` (no trailing slashes)."""

from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt

from . import (
    cors,
    cron,
    dead_letter,
    durable,
    jobs,
    progress,
    queues,
    rate_limits,
    results,
    system,
    waits,
    workers,
    workflows,
)
from .admin import urls as admin_urls
from .errors import json_error
from .plain_views import LeanPost

UNKNOWN_ENDPOINT_HINT = ("No endpoint has this path: compare it with the OJS HTTP binding's endpoint list; "
                         "paths end without a slash (/ojs/v1/jobs, not /ojs/v1/jobs/).")


@csrf_exempt
def unknown_endpoint(request, *args, **kwargs):
    # not_found's own hint speaks of ids and retention: here the path itself is wrong.
    return json_error("not_found", f"no OJS endpoint at {request.path}", 404, hint=UNKNOWN_ENDPOINT_HINT)


urlpatterns = [
    path("manifest", system.ManifestView.as_view()),
    path("v1/health", system.HealthView.as_view()),
    # The hot three: POST without DRF's request/response handling (api/lean.py).
    path("v1/jobs", LeanPost(jobs.PushView)),
    path("v1/jobs/batch", jobs.BatchView.as_view()),
    path("v1/jobs/<str:job_id>", jobs.JobView.as_view()),
    path("v1/jobs/<str:job_id>/activate", jobs.ActivateView.as_view()),
    path("v1/jobs/<str:job_id>/signal", waits.JobSignalView.as_view()),
    path("v1/jobs/<str:job_id>/result", results.ResultView.as_view()),
    path("v1/jobs/<str:job_id>/progress", progress.ProgressView.as_view()),
    path("v1/jobs/<str:job_id>/progress/stream", progress.ProgressStreamView.as_view()),
    # <path:>: a step's name may hold "/" ("users/42"), which the client percent-encodes
    # and the WSGI server decodes before routing.
    path("v1/jobs/<str:job_id>/steps/<path:name>", durable.StepView.as_view()),
    path("v1/workers/fetch", LeanPost(workers.FetchView)),
    path("v1/workers/ack", LeanPost(workers.AckView)),
    path("v1/workers/ack/batch", LeanPost(workers.BatchAckView)),
    path("v1/workers/nack", workers.NackView.as_view()),
    path("v1/workers/snooze", waits.SnoozeView.as_view()),
    path("v1/workers/wait", waits.WaitView.as_view()),
    path("v1/workers/heartbeat", workers.HeartbeatView.as_view()),
    path("v1/workers/register", workers.RegisterView.as_view()),
    path("v1/workers/deregister", workers.DeregisterView.as_view()),
    path("v1/queues", queues.QueueListView.as_view()),
    path("v1/queues/<str:name>", queues.QueueView.as_view()),
    path("v1/queues/<str:name>/config", queues.QueueConfigView.as_view()),
    path("v1/queues/<str:name>/stats", queues.QueueStatsView.as_view()),
    path("v1/queues/<str:name>/pause", queues.QueuePauseView.as_view()),
    path("v1/queues/<str:name>/resume", queues.QueueResumeView.as_view()),
    path("v1/dead-letter", dead_letter.DeadLetterListView.as_view()),
    path("v1/dead-letter/stats", dead_letter.DeadLetterStatsView.as_view()),
    path("v1/dead-letter/<str:job_id>", dead_letter.DeadLetterJobView.as_view()),
    path("v1/dead-letter/<str:job_id>/retry", dead_letter.DeadLetterRetryView.as_view()),
    path("v1/rate-limits", rate_limits.RateLimitListView.as_view()),
    path("v1/rate-limits/<str:key>", rate_limits.RateLimitView.as_view()),
    path("v1/cron", cron.CronListView.as_view()),
    path("v1/cron/<str:name>", cron.CronView.as_view()),
    path("v1/workflows", workflows.WorkflowCreateView.as_view()),
    path("v1/workflows/<str:workflow_id>", workflows.WorkflowView.as_view()),
    path("v1/workflows/<str:workflow_id>/signal", waits.WorkflowSignalView.as_view()),
    path("v1/workflows/<str:workflow_id>/jobs", workflows.WorkflowJobsView.as_view()),
    path("v1/workflows/<str:workflow_id>/progress", workflows.WorkflowProgressView.as_view()),
    path("v1/events", system.EventListView.as_view()),
    path("v1/metrics", system.MetricsView.as_view()),
    path("v1/_test/reset", system.ResetView.as_view()),
    # The admin API (ojs-admin-api): api/admin/urls.py.
    path("v1/admin/", include(admin_urls)),
    # Every other path, newlines and odd bytes included ("^.*$" misses "\n").
    re_path(r"", unknown_endpoint),
]
# CORS (binding §20), on every route above and the admin API's: api/cors.py.
urlpatterns = cors.served_cross_origin(urlpatterns)
