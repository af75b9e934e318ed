"""The in-process worker: handlers, their context, middleware, and the runtime loop.

The runtime talks to the core directly (``core.turn.settle_and_fetch``,
``core.workers.beat``), never through the HTTP binding.
"""
