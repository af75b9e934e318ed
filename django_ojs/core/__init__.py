"""The core: every state change of a job, one transaction each.

Callers use the managers (``Job.objects.push()``, ``Worker.objects.beat()``,
...); the modules here hold their implementations, one concern each.
"""
