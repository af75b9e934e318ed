"""Every django-ojs setting's default, from the spec documents named beside each.

Durations are in seconds unless the name says otherwise. The settings
reference (docs/reference/settings.md) is generated from this module: a
``# -- Section --`` line starts a section, the comment right above a setting
is its meaning there (Markdown), its rule in ``rules.py`` gives its type.
After a change, ``python -m tests.docs.settings_reference`` rewrites the page.
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, Any] = {
    # -- HTTP API ---------------------------------------------------------
    # Require `Authorization: Bearer <key>` on every endpoint but `health`. Off
    # opens the API to anyone who reaches it; every start then logs a warning.
    "AUTH_REQUIRED": True,
    # How long a process trusts an API key it verified: a key revoked in
    # another process stops working within this many seconds (at once in the
    # revoking process). A key's expiry is not delayed by it: every process
    # refuses an expired key at once. `0`: a query per request.
    "API_KEY_CACHE_SECONDS": 5,
    # Content-Type of responses (binding §4.1). `"application/json"` serves the
    # official Python SDK, which only parses that (docs/explanation/decisions.md, "SDK compatibility").
    "RESPONSE_MEDIA_TYPE": "application/openjobspec+json",
    # Largest job body PUSH accepts; larger → 413 `payload_too_large`
    # (ojs-core §14 rule 4 recommends 1 MiB).
    "MAX_ENVELOPE_BYTES": 1024 * 1024,
    # Most jobs in one batch PUSH (ojs-json-format §8.3: at least 1,000).
    "MAX_BATCH_SIZE": 1000,
    # Largest batch PUSH body.
    "MAX_BATCH_BYTES": 32 * 1024 * 1024,
    # Largest FETCH `count`.
    "MAX_FETCH_COUNT": 1000,
    # How often one job may snooze (docs/how-to/snooze-signals-timers.md).
    # Snoozes spend no attempt, so without a bound a handler that always
    # snoozes would run for ever; the snooze beyond it fails the job, not
    # retryable, with the error type `snooze_limit`.
    "MAX_SNOOZES": 100,
    # Default page size of list endpoints (binding §17).
    "PAGE_SIZE": 50,
    # Largest `limit` of list endpoints.
    "MAX_PAGE_SIZE": 200,
    # The `docs_url` of error bodies: the binding's error-handling section.
    "DOCS_URL": "https://openjobspec.org/spec/v1/ojs-http-binding#16-error-handling",
    # Origins of browser dashboards allowed to call the API cross-origin
    # (binding §20), each as the browser sends it: `"https://dash.example.com"`
    # (scheme, host, port if not the default; no path). Their preflights are
    # answered without a key and their responses carry CORS headers; other
    # origins get none. `[]`: no CORS. `"*"` is refused: every endpoint but
    # health and the manifest needs a key ([Serving](../how-to/serving.md#browser-dashboards-cors)).
    "CORS_ALLOWED_ORIGINS": [],
    # -- Jobs ---------------------------------------------------------------
    # The queue of a job that names none (and whose handler names none).
    "DEFAULT_QUEUE": "default",
    # Execution timeout of a job that sets none (ojs-core §5.2); `0` disables it.
    "DEFAULT_TIMEOUT": 1800,
    # Reservation period of a claimed job (ojs-worker-protocol §5.2; the
    # binding's 30 s is not used, see docs/explanation/decisions.md). Heartbeats extend it.
    "DEFAULT_VISIBILITY_TIMEOUT": 1800,
    # A project-wide retry policy, merged under each job's own; a project's dict
    # is merged over this one. Otherwise ojs-retry §8's: 3 attempts, exponential
    # from 1 s, at most 5 min, with jitter -- but an exhausted job is kept in the
    # dead letter (`on_exhaustion: "dead_letter"`, where §8 discards it:
    # ojs-dead-letter calls silent discarding unacceptable in production). A
    # job's own `"on_exhaustion": "discard"` still discards it.
    "DEFAULT_RETRY": {"on_exhaustion": "dead_letter"},
    # Record lifecycle events (ojs-events) in the same transaction as each change.
    "EVENTS": True,
    # Keep a job's events as long as the job itself: they are deleted with it
    # (its retention, a purge, a bulk delete), so a job kept 180 days in the
    # dead letter keeps its whole story. False: each event is pruned
    # `RETENTION["events"]` after it was written, even while its job is kept.
    "EVENTS_KEPT_WITH_JOB": True,
    # Prepare the hot statements (PUSH of one job, FETCH, ACK, the worker's
    # turn) on PostgreSQL (`core/pg/prepared.py`). `None`: yes, unless the
    # database sets Django's `DISABLE_SERVER_SIDE_CURSORS` (a transaction
    # pooler such as PgBouncer before 1.21, where they cannot work; see
    # [PgBouncer](../how-to/pgbouncer.md)), and each such session plans them
    # once a minute (`plan_cache_mode = force_generic_plan`, `DEALLOCATE ALL`
    # every 60 s). `True`: prepared, no session setting changed (PgBouncer 1.21+).
    "PREPARED_STATEMENTS": None,
    # On PostgreSQL, the common cases of PUSH, FETCH, ACK and the worker's turn
    # run as one statement each (the PostgreSQL engine, `django_ojs/core/pg`).
    # `False` runs every operation in its ORM steps, as on SQLite: the same
    # behaviour, slower. The contract suite runs the core both ways; an
    # operator may turn the engine off to rule it out.
    "ONE_STATEMENT_PATHS": True,
    # How long PUSH and FETCH may use a queue's configuration (limits, bound)
    # and maintenance mode as read earlier; a change made in another process
    # takes effect within it.
    "QUEUE_CONFIG_TTL": 1.0,
    # -- Workers (the protocol) ---------------------------------------------
    # Seconds between a worker's heartbeats (ojs-worker-protocol §4.2).
    "HEARTBEAT_INTERVAL": 5,
    # Silence after which the reaper declares a worker dead and recovers its
    # jobs (ojs-worker-protocol §10.1); at least 3 intervals.
    "HEARTBEAT_TIMEOUT": 30,
    # -- The Python worker (`manage.py ojs_worker`) -------------------------
    # Handlers run at once, one thread each (ojs-worker-protocol §8.1; `--concurrency`).
    "WORKER_CONCURRENCY": 10,
    # Queues read, highest priority first (`--queue`).
    "WORKER_QUEUES": ["default"],
    # Labels shown with the worker (`--label`).
    "WORKER_LABELS": [],
    # Drain time after SIGTERM (ojs-graceful-shutdown §6.1, 30 s; the older
    # worker protocol said 25 s; `--grace-period`).
    "SHUTDOWN_GRACE_PERIOD": 30,
    # Idle fetch interval without LISTEN (SQLite, or while the listener is down).
    "POLL_INTERVAL": 0.5,
    # Fallback fetch interval while LISTENing on PostgreSQL.
    "LISTEN_POLL_INTERVAL": 5.0,
    # Where an idle worker (and a web process's waiters) LISTENs for new jobs:
    # `True` the `default` database, unless it carries `DISABLE_SERVER_SIDE_CURSORS`
    # (a transaction pooler: then it polls, `django_ojs.W007`); a database alias
    # (behind PgBouncer in transaction mode, one that reaches PostgreSQL directly:
    # notifications need a session of their own); `False` nowhere, the worker polls
    # every `POLL_INTERVAL`.
    "LISTEN": True,
    # Most completions written at once.
    "ACK_BATCH_SIZE": 500,
    # Longest a completion waits to be written; a crash inside it leaves the
    # job active, and it runs again (at least once, never lost).
    "ACK_FLUSH_WINDOW": 0.02,
    # Keep stack traces out of stored errors (ojs-core §12).
    "OMIT_BACKTRACES": False,
    # Dotted paths of enqueue middleware (ojs-middleware): callables, or classes
    # instantiated once without arguments; outermost first.
    "ENQUEUE_MIDDLEWARE": [],
    # Dotted paths of execution middleware, outermost first.
    "EXECUTION_MIDDLEWARE": [],
    # Periodic jobs declared in code, each shaped like an HTTP cron registration
    # (`name`, `cron`, `timezone`, `type`, `args`, `options`, ...); `ojs_reaper`
    # syncs them (and `@job(..., cron=...)`) into the store at start, removing
    # only schedules that came from code.
    "CRON": [],
    # -- The reaper (`manage.py ojs_reaper`) --------------------------------
    # Seconds between timekeeping passes: due jobs, leases, execution timeouts,
    # dead workers (`--interval`). Sub-second keeps retries punctual.
    "REAPER_INTERVAL": 0.25,
    # Seconds between cron passes.
    "CRON_INTERVAL": 1.0,
    # Seconds between retention passes.
    "PRUNE_INTERVAL": 60.0,
    # Rows one pass moves per transaction, so no pass holds locks for long.
    "REAPER_BATCH_SIZE": 500,
    # How long finished jobs, events and dead workers' rows are kept, in seconds
    # unless the key says otherwise; a project's dict is merged over this one.
    "RETENTION": {
        # Completed jobs.
        "completed": 7 * 86400,
        # Cancelled jobs.
        "cancelled": 7 * 86400,
        # Discarded jobs not in the dead letter.
        "discarded": 7 * 86400,
        # Dead-letter jobs (ojs-dead-letter §5.2).
        "dead_letter": 180 * 86400,
        # Most dead-letter jobs kept; the oldest go first (ojs-dead-letter §5.2).
        "dead_letter_max_count": 10_000,
        # Lifecycle events of no job (workers, queues, schedules), and of jobs
        # deleted by other means; with `EVENTS_KEPT_WITH_JOB` False, every event.
        "events": 86400,
        # Rows of workers declared dead, kept so the admin shows them and a
        # returning worker is recognised.
        "dead_workers": 86400,
        # Workflows that ended, with their steps' results and errors.
        "workflows": 7 * 86400,
        # The statistics history's one-minute buckets (ojs-admin-api §10.2 asks
        # for at least 24 hours of them).
        "history_minutes": 2 * 86400,
        # The statistics history's one-hour buckets (at least 30 days, §10.2).
        "history_hours": 35 * 86400,
    },
    # Days of finished jobs one history partition holds, on a partitioned
    # PostgreSQL job table ([History partitions](../how-to/history-partitions.md)):
    # retention drops a partition once all of it is past its state's retention.
    # Discarded jobs' partitions hold at least 30 days (each discarded job goes at
    # its own "kept until"). A change applies to the partitions made after it.
    "HISTORY_PARTITION_DAYS": 1,
    # -- Progress (ojs-progress) ----------------------------------------------
    # Seconds between two `job.progress` events of one job, beside the first
    # report of an attempt and each crossing of 25, 50, 75 and 100 %, which
    # always record one. The latest report is stored on the job every time;
    # events are its history, and one a second (§6.2's ceiling) would bury
    # the job's claims and failures in it within a minute.
    "PROGRESS_EVENT_INTERVAL": 30.0,
    # Progress streams (`GET /ojs/v1/jobs/{id}/progress/stream`) one process
    # serves at once; past it, 503 with `Retry-After`. Each open stream holds
    # a server thread and its database connection: keep it below gunicorn's
    # `threads` so the other requests always find one.
    "PROGRESS_STREAMS": 2,
    # Longest a progress stream stays open; the client reconnects (it was told
    # `retry:`), so a thread is never held for a job's whole run.
    "PROGRESS_STREAM_SECONDS": 300.0,
    # How often an open progress stream reads the job (one indexed read each).
    "PROGRESS_STREAM_POLL_INTERVAL": 1.0,
    # Blocking waits for a result (`GET /ojs/v1/jobs/{id}/result?wait=true`)
    # one process holds at once; past it, 503 with `Retry-After`. Each holds a
    # server thread, as a progress stream does: keep it plus `PROGRESS_STREAMS`
    # below gunicorn's `threads` (2 + 1 < 4, the example's), or streams and waits
    # held together leave no thread to answer anything else, their 503s included.
    "RESULT_WAITS": 1,
    # Longest a blocking wait for a result holds its thread; a longer
    # `timeout` is cut to it, and the wait answers 408 when it ends first.
    # Keep it below the time the proxy in front waits for a silent answer
    # (nginx's `proxy_read_timeout`, a load balancer's idle timeout: 60 s by
    # default), which otherwise cuts the wait with its own 504.
    "RESULT_WAIT_MAX_SECONDS": 50.0,
    # -- Observability --------------------------------------------------------
    # Prometheus metrics (needs the `prometheus` extra): counters and histograms
    # in every process, served with store-wide gauges at `GET /ojs/v1/metrics`
    # (any API key scope). With several processes, set
    # `PROMETHEUS_MULTIPROC_DIR` for all of them.
    "METRICS": False,
    # OpenTelemetry spans (needs the `otel` extra): a producer span per enqueue,
    # the W3C trace context carried in the job's `meta`, a consumer span per
    # execution under it. The project configures the SDK (provider, exporter,
    # sampler); the sampler is the lever on its cost (docs/how-to/tracing.md).
    "TRACING": False,
    # -- The admin (the operators' console) ---------------------------------
    # Meta keys the admin's job search matches a plain term against, besides
    # the job id and type (`key:value` searches any key).
    "ADMIN_SEARCH_META_KEYS": ["tenant_id", "correlation_id"],
    # -- Testing ------------------------------------------------------------
    # The conformance suites' test hooks (`POST /ojs/v1/_test/reset`,
    # `meta.test_directive` steering heartbeat replies). Never in production;
    # every start warns while it is on.
    "TEST_HOOKS": False,
}
