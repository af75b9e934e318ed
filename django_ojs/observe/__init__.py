"""What django-ojs tells the world about itself: lifecycle signals, Prometheus
metrics, OpenTelemetry spans, database-outage log lines and default logging.

``signals`` sits just above the models (the core sends through it); the rest
read the core and are used by the doors.
"""
