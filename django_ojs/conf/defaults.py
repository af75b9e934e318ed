"""Every django-ojs setting's default, from the spec documents named beside each.

Durations are in seconds unless the name says otherwise. The settings
reference (docs) is generated from this module's comments.
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, Any] = {
    # -- HTTP API ---------------------------------------------------------
    # Require "Authorization: Bearer <key>". Turning it off opens the API to
    # anyone who can reach it; every start then logs a warning.
    "AUTH_REQUIRED": True,
    # How long a process trusts an API key it verified (keys.py KeyCache):
    # a key revoked elsewhere stops working within this many seconds. 0: a
    # query per request.
    "API_KEY_CACHE_SECONDS": 5,
    # The binding's media type (ojs-http-binding §4.1). The official Python
    # SDK only parses successful responses labelled "application/json": set
    # this to "application/json" to serve it (README, "SDK compatibility").
    "RESPONSE_MEDIA_TYPE": "application/openjobspec+json",
    # ojs-core §14 rule 4 recommends 1 MiB per envelope.
    "MAX_ENVELOPE_BYTES": 1024 * 1024,
    # ojs-json-format §8.3: at least 1,000 jobs per batch.
    "MAX_BATCH_SIZE": 1000,
    "MAX_BATCH_BYTES": 32 * 1024 * 1024,
    # Upper bound of FETCH "count".
    "MAX_FETCH_COUNT": 1000,
    # List endpoints: default and maximum page size (ojs-http-binding §17).
    "PAGE_SIZE": 50,
    "MAX_PAGE_SIZE": 200,
    "DOCS_URL": "https://openjobspec.org/spec/v1/ojs-http-binding#16-error-handling",
    # -- Jobs ---------------------------------------------------------------
    "DEFAULT_QUEUE": "default",
    # ojs-core §5.2: execution timeout, 1800 s by default; 0 disables it.
    "DEFAULT_TIMEOUT": 1800,
    # ojs-worker-protocol §5.2: 1800 s (not the binding's 30 s, see README).
    "DEFAULT_VISIBILITY_TIMEOUT": 1800,
    # ojs-retry §8; a project may change the default policy here.
    "DEFAULT_RETRY": {},
    # Record lifecycle events (ojs-events) in the same transaction as the move.
    "EVENTS": True,
    # Prepare the hot statements on the server (core/pg/prepared.py): None, unless
    # the database sets DISABLE_SERVER_SIDE_CURSORS (behind a transaction
    # pooler such as PgBouncer < 1.21, where they cannot work); True / False.
    "PREPARED_STATEMENTS": None,
    # On PostgreSQL the common cases of PUSH, FETCH, ACK and the worker's turn
    # run as one statement each (core/pg, "the PostgreSQL engine"). False runs
    # every operation in its ORM steps, as on SQLite: the same behaviour,
    # slower -- the contract suite runs the core both ways.
    "ONE_STATEMENT_PATHS": True,
    # -- Observability (README "Observability") -----------------------------
    # Prometheus metrics (the "prometheus" extra): counters and histograms in
    # every process, served with store-wide gauges at /ojs/v1/metrics.
    "METRICS": False,
    # OpenTelemetry spans (the "otel" extra): a producer span per enqueue, a
    # consumer span per execution, trace context carried in meta.
    "TRACING": False,
    # -- Workers ------------------------------------------------------------
    # ojs-worker-protocol §4.2 and §10.1.
    "HEARTBEAT_INTERVAL": 5,
    "HEARTBEAT_TIMEOUT": 30,
    # -- The Python worker (manage.py ojs_worker) ---------------------------
    # ojs-worker-protocol §8.1: jobs one worker process runs at once.
    "WORKER_CONCURRENCY": 10,
    "WORKER_QUEUES": ["default"],
    "WORKER_LABELS": [],
    # ojs-graceful-shutdown §6.1 (30 s; the older worker protocol said 25 s).
    "SHUTDOWN_GRACE_PERIOD": 30,
    # Idle wake-up. On PostgreSQL the worker LISTENs for new jobs and polls
    # only as a fallback every LISTEN_POLL_INTERVAL; on SQLite (no
    # notifications) it polls every POLL_INTERVAL.
    "POLL_INTERVAL": 0.5,
    "LISTEN_POLL_INTERVAL": 5.0,
    # Where the worker LISTENs: True, the "default" database; a database alias,
    # that connection (behind PgBouncer in transaction mode, an alias that
    # reaches PostgreSQL directly: notifications need a session of their
    # own); False, nowhere -- the worker polls every POLL_INTERVAL.
    "LISTEN": True,
    # Completions are written in batches: at most this many per write, and
    # none waits longer than ACK_FLUSH_WINDOW seconds. A crash inside the
    # window leaves the job active; the reaper hands it out again (at least
    # once, never lost).
    "ACK_BATCH_SIZE": 500,
    "ACK_FLUSH_WINDOW": 0.02,
    # ojs-core §12 (security): keep stack traces out of stored errors.
    "OMIT_BACKTRACES": False,
    # Middleware chains (ojs-middleware): dotted paths of callables or of
    # classes instantiated without arguments, outermost / first first.
    "ENQUEUE_MIDDLEWARE": [],
    "EXECUTION_MIDDLEWARE": [],
    # Periodic jobs declared in code, each shaped like a cron registration
    # over HTTP ({"name", "cron", "timezone", "type", "args", "options", ...});
    # the reaper syncs them (and @job(..., cron=...)) into the store at start.
    "CRON": [],
    # -- Reaper (manage.py ojs_reaper) --------------------------------------
    # How often the timekeeping loops run: promotion of due jobs, leases,
    # execution timeouts, dead workers. Sub-second keeps retries punctual.
    "REAPER_INTERVAL": 0.25,
    "CRON_INTERVAL": 1.0,
    "PRUNE_INTERVAL": 60.0,
    # Rows one loop moves per transaction, so no tick holds locks for long.
    "REAPER_BATCH_SIZE": 500,
    # Retention of finished jobs and events, in seconds (ojs-dead-letter §5.2
    # for the dead letter: 180 days, at most 10,000 jobs).
    "RETENTION": {
        "completed": 7 * 86400,
        "cancelled": 7 * 86400,
        "discarded": 7 * 86400,
        "dead_letter": 180 * 86400,
        "dead_letter_max_count": 10_000,
        "events": 86400,
        # Rows of workers declared dead, kept so the admin can show them and a
        # worker that comes back is recognised.
        "dead_workers": 86400,
        # Workflows that ended, with their steps' results and errors.
        "workflows": 7 * 86400,
        # The statistics history (ojs-admin-api §10.2 asks for at least 24 h of
        # minutes and 30 days of hours).
        "history_minutes": 2 * 86400,
        "history_hours": 35 * 86400,
    },
    # -- Admin (the operators' console) ------------------------------------
    # meta keys a plain search term is matched against, besides the job id
    # and type; "key:value" searches any key.
    "ADMIN_SEARCH_META_KEYS": ["tenant_id", "correlation_id"],
    # -- Testing ------------------------------------------------------------
    # Test-only behaviour the conformance suites need: POST
    # /ojs/v1/_test/reset and meta.test_directive steering BEAT replies.
    # Never in production; every start logs a warning while it is on.
    "TEST_HOOKS": False,
    # How long PUSH and FETCH may use a queue's configuration (limits, bound)
    # and maintenance mode as read earlier; a change made elsewhere takes
    # effect within this time.
    "QUEUE_CONFIG_TTL": 1.0,
}
