"""gunicorn's configuration for serving the HTTP API and the admin in production.

    gunicorn -c example_project/gunicorn.conf.py

Every value says why it is what it is; docs/how-to/serving.md has the whole
story (keep-alive, the proxy in front, sizing). Command-line flags override
these (``--bind``, ``--workers``); so does ``GUNICORN_CMD_ARGS``.
"""

import os

wsgi_app = "example_project.wsgi:application"

# Where to listen: gunicorn's default, 127.0.0.1:8000, or 0.0.0.0:$PORT when
# PORT is set. Behind a proxy on another host, bind to an address it reaches
# (--bind 0.0.0.0:8000) and let only the proxy reach it.

# Threads, not processes alone: a request to the API spends most of its time
# waiting for PostgreSQL, and a waiting thread costs little. The gthread worker
# is also the one that keeps connections alive between requests (the default
# sync worker closes each one after its response).
worker_class = "gthread"

# One process per core: a process runs Python on one core at a time, whatever
# its threads. WEB_CONCURRENCY (gunicorn's own variable) overrides it; set it in
# a container, where the host's cores are not the container's share of them.
def _cores() -> int:
    """The cores this process may run on (Linux knows; elsewhere, the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


workers = int(os.environ.get("WEB_CONCURRENCY", _cores()))

# Requests one process serves at once. Each thread keeps its own database
# connection (Django's connections are per thread; CONN_MAX_AGE keeps them), so
# workers x threads is the web tier's share of PostgreSQL's max_connections,
# or of PgBouncer's pool. More threads help only while requests wait on the
# database; past about 8 the process is busy running Python.
threads = int(os.environ.get("GUNICORN_THREADS", "4"))

# How long an idle connection is kept open for the client's next request.
# Whoever sends requests on a connection must be the first to give it up: a
# server that closes it first can close it just as a request arrives, and the
# client sees a reset (ReadError, "connection reset by peer") for a request
# the server never read. So this is longer than the idle time of every
# client's pool -- httpx (the OJS Python SDK's client) keeps an idle connection
# 5 s, most clients less than a minute -- and longer than a fronting proxy's
# idle time for its connections to us: nginx's upstream keepalive_timeout
# (60 s by default) and an AWS load balancer's idle timeout (60 s). gunicorn's
# own default, 2 s, is shorter than all of them. An idle kept-alive connection
# costs a socket and no thread in the gthread worker.
keepalive = 75

# Connections one process holds open at once, idle kept-alive ones included
# (gunicorn's default): at 75 s of keep-alive, many clients' idle connections.
# When they are all in use, responses are sent with "Connection: close".
worker_connections = 1000

# A process that has not told the arbiter it is alive for this long is killed
# and replaced. In the gthread worker the process's main loop says so, not the
# request threads, so this does not cut a slow request: it catches a process
# that is stuck as a whole.
timeout = 30

# On SIGTERM (a deploy, Kubernetes stopping the pod) each process stops
# accepting, answers the requests it is serving and closes its idle
# connections, for up to this long, then is killed. It covers the longest
# request in flight: the API answers in milliseconds, the largest batch PUSH
# (OJS["MAX_BATCH_BYTES"], 32 MiB, its body already read by the buffering
# proxy) in seconds, one batch of an admin bulk move likewise. Kubernetes'
# terminationGracePeriodSeconds must be longer than this (plus any preStop
# sleep).
graceful_timeout = 30


# A stopping process refuses new connections rather than queueing them to be reset.
# gunicorn's master closes its listening socket first, but the socket stays open as
# long as a process holds it, and a process holds it until it exits: through its
# graceful stop, and through its 2 s linger for kept-alive connections, whose
# clients are then told "Connection: close" and connect again. The kernel queues
# each new connection meanwhile, the client sends its request into the queue, and
# when the last process exits the kernel resets every queued one: "connection
# reset" for a request the server never read, which a client cannot tell from one
# the server died serving (was the PUSH stored? retry, and it may be stored twice).
# Closed as soon as the process stops accepting, a new connection is refused, which
# every client knows it may retry, while the requests held are answered as before
# (only a connection that arrives in the instant between a process's last accept and
# its close is still reset: a few milliseconds, longer on a loaded machine).
# On a HUP, USR2 or scale-down the master and the other processes still hold the
# socket, so it goes on accepting there. Only the gthread worker (above) has this
# step; another worker class is left as gunicorn made it.
def post_worker_init(worker) -> None:
    """Close the process's listening sockets when it stops accepting to stop."""
    stop_accepting = getattr(worker, "set_accept_enabled", None)
    if stop_accepting is None:
        return

    def set_accept_enabled(enabled: bool) -> None:
        stop_accepting(enabled)
        if not enabled and not worker.alive:
            for listener in worker.sockets:
                listener.close()

    worker.set_accept_enabled = set_accept_enabled

# The longest request line gunicorn reads (its maximum; its default is 4094 bytes): the
# admin API's job searches (up to 1,000 characters, each up to 6 bytes once
# percent-encoded) and cursors make longer URLs, and gunicorn refuses a longer line
# itself, with an HTML 414 instead of the API's error body.
limit_request_line = 8190

# No periodic restart of processes (gunicorn's default, max_requests = 0): a
# process that restarts closes its kept-alive connections, each a chance for a
# client's request to meet a closed connection.
max_requests = 0

# gunicorn 25.1+'s control socket (gunicornc) sits at one path per user, shared
# by every gunicorn that user runs (several sites, a test run beside a
# server): off. Scale with WEB_CONCURRENCY and a restart. Older versions ignore this name.
control_socket_disable = True

# Logs to standard output and error, for the container's or the service
# manager's log collector. The access log's line is gunicorn's default format.
accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
