"""The errors django-ojs raises, one class per OJS error code.

The public name of ``django_ojs.protocol.errors``, where they are defined:
``from django_ojs.errors import DuplicateJob`` keeps working wherever the
definitions live.
"""

from .protocol.errors import (
    Duplicate,
    DuplicateJob,
    FieldError,
    InvalidPayload,
    InvalidRequest,
    InvalidTransition,
    JobCancelled,
    JobFailed,
    JobNotCompleted,
    NotFound,
    OJSError,
    PayloadTooLarge,
    PolicyInvalid,
    QueueFull,
    QueuePaused,
    Unsupported,
    WaitTimedOut,
)

__all__ = [
    "Duplicate",
    "DuplicateJob",
    "FieldError",
    "InvalidPayload",
    "InvalidRequest",
    "InvalidTransition",
    "JobCancelled",
    "JobFailed",
    "JobNotCompleted",
    "NotFound",
    "OJSError",
    "PayloadTooLarge",
    "PolicyInvalid",
    "QueueFull",
    "QueuePaused",
    "Unsupported",
    "WaitTimedOut",
]
