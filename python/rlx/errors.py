"""rlx statuses as Python exceptions: one RlxError subclass per rlx_status.

Each carries the status code (.status), its name (.status_name) and the
message the C library wrote on the failing graph or executable (.message).
Where a standard exception means the same thing, the class also derives from
it (InvalidArgumentError is a ValueError, NotFoundError a LookupError, ...),
so generic handlers keep working.
"""

from . import _capi


class RlxError(Exception):
    """A failed rlx call. str() is 'STATUS_NAME: message'."""

    status = None

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__(f"{self.status_name}: {message}")

    @property
    def status_name(self):
        if self.status is None:
            return "UNKNOWN"
        return _capi.text(_capi.lib.rlx_status_name(self.status))


class InvalidArgumentError(RlxError, ValueError):
    status = 1


class NotFoundError(RlxError, LookupError):
    status = 2


class UnimplementedError(RlxError, NotImplementedError):
    status = 3


class UnavailableError(RlxError, RuntimeError):
    status = 4


class ResourceExhaustedError(RlxError, MemoryError):
    status = 5


class OutOfRangeError(RlxError, IndexError):
    status = 6


class FailedPreconditionError(RlxError, RuntimeError):
    status = 7


class InternalError(RlxError, RuntimeError):
    status = 8


_BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, NotFoundError, UnimplementedError, UnavailableError,
    ResourceExhaustedError, OutOfRangeError, FailedPreconditionError, InternalError)}


def error_for(status, message):
    """The exception for a non-OK status (RlxError itself for an unknown code)."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        return RlxError(message, status)
    return cls(message)


def check(status, message_fn):
    """Raises the status's exception, its message from message_fn(), unless OK."""
    if status != 0:
        message = message_fn() if callable(message_fn) else message_fn
        raise error_for(status, message or "(no message)")
