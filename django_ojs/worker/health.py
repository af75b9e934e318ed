"""An optional HTTP readiness probe (``ojs_worker --health-port``; ojs-graceful-shutdown §8.1).

``GET /readyz`` (and ``/healthz``, the path the spec's Kubernetes example
uses) answers 200 while the worker is running and 503 once it is quiet or
terminating, so an orchestrator stops routing to it. ``GET /livez`` answers
200 while the process serves at all: point a liveness probe there, not at
``/healthz``, or a quiet worker would be restarted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..protocol.states import WorkerState


class HealthServer:
    def __init__(self, host: str, port: int, state: Callable[[], WorkerState]):
        self._state = state
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="ojs-health", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        state_of = self._state

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                state = state_of()
                if self.path in ("/readyz", "/healthz"):
                    ready = state == WorkerState.RUNNING
                    self._reply(200 if ready else 503, {"ready": ready, "state": state.value})
                elif self.path == "/livez":
                    self._reply(200, {"alive": True, "state": state.value})
                else:
                    self._reply(404, {"error": "not found; try /readyz or /livez"})

            def _reply(self, status: int, body: dict) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                pass  # probes every few seconds would flood the worker's log

        return Handler
