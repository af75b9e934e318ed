"""The Open Job Spec itself, as Python: pure, no database, no Django ORM.

States and their one transition table, the job envelope, retry policies and
backoff, cron expressions and registrations, durations and timestamps, the
failure a worker reports, the error codes, unique-job fingerprints, rate-limit
arithmetic, progress reports and workflow definitions. Everything above
(``core``, the doors) builds on these; nothing here imports anything above.
"""
