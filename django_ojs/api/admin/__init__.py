"""The admin API (ojs-admin-api): ``/ojs/v1/admin/...``, the control plane other OJS tools manage a server through.

One module per section of the document: queues (§6), jobs (§7) and their bulk
moves (§8), workers (§9), statistics and their history (§10), the system
(§12: maintenance mode, configuration). Routes in ``urls.py``. Every view is
an ``AdminView``: reads need a key with ``read`` or ``admin``, everything else
``admin`` (``base.py``). The views parse, call the core and render; the
moves are the core's (``core/control.py``, ``core/bulk.py``, ``core/queues.py``,
``core/queue_config.py``, ``core/workers.py``, ``core/maintenance_mode.py``),
the counts ``core/stats.py``'s and ``core/history.py``'s, the same the admin
console and ``manage.py ojs`` show.
"""
