"""Every module of the core whose operations the models' managers offer, for them to reach in one import."""

from . import (
    awaiting,
    claim,
    control,
    maintenance,
    push,
    queues,
    schedules,
    settle,
    stats,
    turn,
    types,
    waits,
    workers,
)

__all__ = ["awaiting", "claim", "control", "maintenance", "push", "queues", "schedules", "settle", "stats", "turn",
           "types", "waits", "workers"]
