"""The in-process worker: handlers, their context, middleware, and the runtime loop.

The runtime talks to the core directly (``Job.objects.fetch/ack_many/fail``,
``Worker.objects.beat``), never through the HTTP binding.
"""
