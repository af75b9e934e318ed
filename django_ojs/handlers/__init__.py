"""Handlers and what surrounds them: the registry, job options, the execution
context and the middleware chains.

The producer (``django_ojs.enqueue``), the web process (the tasks backend)
and the worker runtime all use them, so they live here rather than in
``worker/``, which is only the ``ojs_worker`` runtime: a web process imports
no worker code.
"""
