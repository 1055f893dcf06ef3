"""The exceptions of the sbx API and the one mapping from libsbx's codes to them.

Every failure the daemon or libsbx reports becomes an instance of a subclass of
:class:`SbxError`, chosen by :func:`error_from_code` from the ``enum sbx_code`` of the
call, with the one-line message libsbx gives (``sbx_error_message``) and its errno
(``sbx_errno``: 0 when the daemon itself answered, the errno of the failure when the
connection failed). Two exceptions are not daemon codes: :class:`CommandFailed` and
:class:`Timeout` are raised only by ``run(..., check=True)`` / :meth:`Result.check`,
and their ``code`` is the command's :class:`Outcome` (``TIMED_OUT``, ``EXITED``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Type, Union

from ._types import Code, Outcome

if TYPE_CHECKING:
    from ._types import Result

__all__ = [
    "SbxError",
    "InvalidArgument",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "ReadOnly",
    "TooLarge",
    "Unavailable",
    "SandboxEnded",
    "Unimplemented",
    "Internal",
    "CommandError",
    "CommandFailed",
    "Timeout",
    "error_from_code",
]


class SbxError(Exception):
    """The base of every sbx exception.

    Attributes:
        code: the :class:`Code` of the failure; for the command endings raised by
            ``check=True`` (:class:`CommandFailed`, :class:`Timeout`) the command's
            :class:`Outcome` (``Outcome.TIMED_OUT``, ``Outcome.EXITED``, ...), so that
            ``e.code.name`` names what happened for every exception of this module.
        message: the daemon's (or libsbx's) one-line message: what failed and what to do.
        errno: the errno of a connection failure; 0 when the daemon answered.
        result: the :class:`Result` that came with the failure, if any.
    """

    #: The code this class stands for (None: not a daemon code).
    default_code: Optional[Code] = None

    def __init__(
        self,
        message: str,
        *,
        code: Optional[Union[Code, Outcome]] = None,
        errno: int = 0,
        result: Optional["Result"] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code: Optional[Union[Code, Outcome]] = code if code is not None else self.default_code
        self.errno = errno
        self.result = result

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}" if self.code is not None else self.message


class InvalidArgument(SbxError, ValueError):
    """A request the daemon (or libsbx) refuses as malformed: a bad ID, path or option."""

    default_code = Code.INVALID_ARGUMENT


class NotFound(SbxError, LookupError):
    """No such sandbox, file or command (or one the policy hides)."""

    default_code = Code.NOT_FOUND


class AlreadyExists(SbxError):
    """The ID or file is taken (sandbox IDs are never reused)."""

    default_code = Code.ALREADY_EXISTS


class PermissionDenied(SbxError, PermissionError):
    """The caller, or the sandbox's user, may not do this."""

    default_code = Code.PERMISSION_DENIED


class ResourceExhausted(SbxError):
    """A limit of the daemon or the host was reached (sandboxes, commands, memory, disk)."""

    default_code = Code.RESOURCE_EXHAUSTED


class FailedPrecondition(SbxError):
    """The state does not allow it (a sandbox not ready, a non-empty directory)."""

    default_code = Code.FAILED_PRECONDITION


class ReadOnly(SbxError):
    """The path is read-only in the sandbox; write under /workspace, /tmp or a writable path."""

    default_code = Code.READ_ONLY


class TooLarge(SbxError):
    """A request or reply over the daemon's limits (frame size, a whole-file read)."""

    default_code = Code.TOO_LARGE


class Unavailable(SbxError, ConnectionError):
    """The daemon cannot be reached (``errno`` says why; ``ETIMEDOUT`` when the call
    timeout passed) or cannot serve now: transient, a later call may succeed."""

    default_code = Code.UNAVAILABLE


class SandboxEnded(SbxError):
    """The sandbox has ended (terminated, expired, failed or lost) or is ending: it will
    never serve again. Terminal: stop, do not retry; create a new sandbox.

    Raised for the daemon's SANDBOX_ENDED, and by ``check=True`` for a command whose
    sandbox ended while it ran. Deliberately not an :class:`Unavailable` (nor a
    ``ConnectionError``): code that retries on those, as it should for a daemon that is
    restarting, would retry an ended sandbox forever."""

    default_code = Code.SANDBOX_ENDED


class Unimplemented(SbxError, NotImplementedError):
    """The daemon does not implement this request (it is older than this library)."""

    default_code = Code.UNIMPLEMENTED


class Internal(SbxError):
    """A bug or a protocol error in the daemon or libsbx; the connection is re-made at
    the next call."""

    default_code = Code.INTERNAL


class CommandError(SbxError):
    """A command ended without success and ``check=True`` asked to raise; ``result``
    says how it ended, and ``code`` is its :class:`Outcome` (``result.outcome``)."""

    def __init__(self, message: str, *, errno: int = 0, result: Optional["Result"] = None,
                 code: Optional[Union[Code, Outcome]] = None) -> None:
        if code is None and result is not None:
            code = result.outcome
        super().__init__(message, code=code, errno=errno, result=result)


class CommandFailed(CommandError):
    """The command exited non-zero, was killed by a signal, did not start, or never got
    a slot (:attr:`Outcome.QUEUE_TIMEOUT`)."""


class Timeout(CommandError, TimeoutError):
    """The command ran past its timeout and was killed (``result.timed_out``).

    Without ``check=True`` a timeout is not an exception: ``run`` returns the result with
    ``timed_out`` set, as for any other end. A *call* that times out waiting for the
    daemon (``Client(call_timeout=...)``) is :class:`Unavailable` with errno
    ``ETIMEDOUT``, not this."""


_BY_CODE: Dict[Code, Type[SbxError]] = {
    Code.INVALID_ARGUMENT: InvalidArgument,
    Code.NOT_FOUND: NotFound,
    Code.ALREADY_EXISTS: AlreadyExists,
    Code.PERMISSION_DENIED: PermissionDenied,
    Code.RESOURCE_EXHAUSTED: ResourceExhausted,
    Code.FAILED_PRECONDITION: FailedPrecondition,
    Code.READ_ONLY: ReadOnly,
    Code.TOO_LARGE: TooLarge,
    Code.UNAVAILABLE: Unavailable,
    Code.UNIMPLEMENTED: Unimplemented,
    Code.INTERNAL: Internal,
    Code.SANDBOX_ENDED: SandboxEnded,
}


def error_from_code(
    code: int, message: str, errno: int = 0, result: Optional["Result"] = None
) -> SbxError:
    """The exception for a failed call: ``code`` (an ``enum sbx_code``), the message and
    errno libsbx gave. A code this binding does not know becomes :class:`Internal` (its
    number is kept in the message)."""
    try:
        c = Code(code)
    except ValueError:
        return Internal(f"unknown status code {code}: {message}", errno=errno, result=result)
    if c == Code.OK:
        raise ValueError("error_from_code: OK is not an error")
    return _BY_CODE[c](message, errno=errno, result=result)
