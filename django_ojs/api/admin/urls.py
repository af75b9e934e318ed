"""The admin API's routes, under ``/ojs/v1/admin/`` (ojs-admin-api §5); ``api/urls.py`` includes them.

Each section of the document has its block.
"""

from django.urls import path

from . import bulk, dead_letter, jobs, queues, stats, system, workers

urlpatterns = [
    # §6 queues
    path("queues", queues.QueueListView.as_view()),
    path("queues/<str:name>", queues.QueueView.as_view()),
    path("queues/<str:name>/pause", queues.QueuePauseView.as_view()),
    path("queues/<str:name>/resume", queues.QueueResumeView.as_view()),
    path("queues/<str:name>/jobs", queues.QueueJobsView.as_view()),
    path("queues/<str:name>/config", queues.QueueConfigView.as_view()),
    # §8 bulk moves, before §7's job paths: "bulk/retry" is no job id.
    path("jobs/bulk/<str:action>", bulk.BulkView.as_view()),
    # §7 jobs
    path("jobs", jobs.JobListView.as_view()),
    path("jobs/<str:job_id>", jobs.JobView.as_view()),
    path("jobs/<str:job_id>/cancel", jobs.JobCancelView.as_view()),
    path("jobs/<str:job_id>/retry", jobs.JobRetryView.as_view()),
    # §9 workers
    path("workers", workers.WorkerListView.as_view()),
    path("workers/<str:worker_id>", workers.WorkerView.as_view()),
    path("workers/<str:worker_id>/quiet", workers.WorkerQuietView.as_view()),
    # §10 statistics
    path("stats", stats.StatsView.as_view()),
    path("stats/history", stats.HistoryView.as_view()),
    # §11 the dead letter (openapi's stats and bulk retry too), the fixed names before the job ids
    path("dead-letter", dead_letter.DeadLetterListView.as_view()),
    path("dead-letter/stats", dead_letter.DeadLetterStatsView.as_view()),
    path("dead-letter/retry", dead_letter.DeadLetterBulkRetryView.as_view()),
    path("dead-letter/<str:job_id>", dead_letter.DeadLetterJobView.as_view()),
    path("dead-letter/<str:job_id>/retry", dead_letter.DeadLetterRetryView.as_view()),
    # §12 the system
    path("system/maintenance", system.MaintenanceView.as_view()),
    path("system/config", system.ConfigView.as_view()),
]
