"""sbx: Python binding of sbxd, the local sandbox daemon for AI agents.

sbxd keeps persistent Linux sandboxes by ID; this package drives it through libsbx
(the C client library, loaded with ctypes; standard library only)::

    import sbx

    with sbx.Client() as client:                    # $SBX_SOCKET or the default socket
        with client.create(timeout=600) as sb:      # terminated when the block ends
            sb.write_file("hello.py", "print('hi from the sandbox')")
            r = sb.run("python3 hello.py", timeout=30)
            print(r.exit_code, r.stdout)            # 0 hi from the sandbox

Main types:

* :class:`Client` -- a connection: ``create``, ``attach``, ``get``, ``list``,
  ``hello``. ``attach(id)`` gives a :class:`Sandbox` for one that exists (made by
  another process, or shared with you); ``get(id)`` only describes one
  (:class:`SandboxInfo`, which runs nothing). One Client runs one call at a time (it
  holds a lock); use one per thread for parallel work.
* :class:`Sandbox` -- a sandbox by ID: ``run``, ``read_file``, ``read_text``,
  ``read_chunk``, ``write_file``, ``list_directory``, ``stat``, ``exists``, ``mkdir``,
  ``remove``, ``set_timeout``, ``terminate``, ``info``, ``history``, ``cancel``,
  ``signal``, ``resize`` (``run(..., tty=True, rows=, cols=)`` runs a command on a
  terminal of the sandbox: REPLs and interactive shells work).
* :class:`Result` (alias ``SandboxResult``) -- what a command produced: ``exit_code``,
  ``stdout``/``stderr`` (str, invalid UTF-8 replaced) and ``stdout_bytes``/
  ``stderr_bytes`` (raw), ``timed_out``, truncation flags, ``duration``, ``isolated``,
  ``warnings``, ``resources`` (:class:`ResourceReport` with ``limits_hit``),
  ``outcome``, ``signal``, ``owner_uid``, ``queued_ms`` (how long it waited for a
  slot: a sandbox runs ``ResourceLimits.commands`` commands at once and the others wait,
  up to ``run(..., queue_timeout=SECS)``; one that gets none ends as
  ``Outcome.QUEUE_TIMEOUT`` and never ran).
* :class:`SandboxPolicy` with :class:`ResourceLimits` and :class:`NetworkMode` -- the
  boundary, as ``SandboxPolicy.workspace_write("/src/project")``.

Errors: every failure raises a subclass of :class:`SbxError`, which carries ``code``
(:class:`Code`), ``message`` (the daemon's actionable one-liner) and ``errno``:
``InvalidArgument``, ``NotFound``, ``AlreadyExists``, ``PermissionDenied``,
``ResourceExhausted``, ``FailedPrecondition``, ``ReadOnly``, ``TooLarge``,
``Unavailable`` (daemon unreachable: transient, retry later), ``SandboxEnded`` (the
sandbox will never serve again: terminal, stop; not an ``Unavailable``),
``Unimplemented``, ``Internal``. A command that fails or times out is *not* an
exception: ``run`` returns its result with ``exit_code``/``timed_out`` set, as agent
tools want. ``run(..., check=True)`` (or ``result.check()``) raises ``Timeout`` or
``CommandFailed`` (both ``CommandError``) instead, whose ``code`` is the command's
:class:`Outcome` (``TIMED_OUT``, ``EXITED``, ...): ``e.code.name`` works for every
exception.

Streaming: ``sb.run(cmd, on_output=lambda stream, data: ...)`` gets each chunk as the
command writes it; the result still has the (capped) output.

asyncio: the API is blocking; ctypes releases the GIL while libsbx waits, so run calls
in threads. Give each task its own Client, since one Client runs one call at a time::

    async def run_in(sandbox_id: str, cmd: str) -> sbx.Result:
        def work() -> sbx.Result:
            with sbx.Client() as c:
                return c.attach(sandbox_id).run(cmd)
        return await asyncio.to_thread(work)

Finding libsbx: ``$SBX_LIBSBX`` (a path) when set; else, when the package runs from a
source tree, that tree's ``$SBX_BUILD`` (default ``build``) directory; else the
``libsbx.so.0`` that ``make install`` put in its LIBDIR; else the dynamic linker's
search (``ctypes.util.find_library("sbx")``, then ``libsbx.so.0``). It is loaded on
first use and checked against this binding's struct layouts; a mismatch raises
:class:`LibraryError`.
"""

from . import _errors
from ._client import Client, Command, Forward, OutputCallback, Sandbox, default_socket_path
from ._errors import (
    AlreadyExists,
    CommandError,
    CommandFailed,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ReadOnly,
    ResourceExhausted,
    SandboxEnded,
    SbxError,
    Timeout,
    TooLarge,
    Unavailable,
    Unimplemented,
    error_from_code,
)
from ._images import ImageConfig, ImageInfo, Images, PullProgress, RemovedImages
from ._lib import LibraryError, library_path
from ._types import (
    Code,
    CommandInfo,
    CommandRecord,
    CommandState,
    DirectoryListing,
    FileEvent,
    FileEventKind,
    FileInfo,
    FileType,
    ConnectionRecord,
    Connections,
    ForwardRecord,
    Forwards,
    Hello,
    History,
    NetworkMode,
    Outcome,
    ReadChunk,
    ResourceLimits,
    ResourceReport,
    Result,
    SandboxInfo,
    SandboxList,
    SandboxPolicy,
    State,
)

#: The version of this binding (it follows sbxd's).
__version__ = "0.1.0"

#: The seeds' names for the same types.
SandboxResult = Result
Policy = SandboxPolicy

__all__ = [
    "Client",
    "Sandbox",
    "Forward",
    "Command",
    "CommandInfo",
    "CommandState",
    "OutputCallback",
    "default_socket_path",
    "Result",
    "SandboxResult",
    "ResourceReport",
    "SandboxPolicy",
    "Policy",
    "ResourceLimits",
    "NetworkMode",
    "SandboxInfo",
    "SandboxList",
    "FileInfo",
    "FileType",
    "FileEvent",
    "FileEventKind",
    "DirectoryListing",
    "ReadChunk",
    "CommandRecord",
    "History",
    "ConnectionRecord",
    "Connections",
    "ForwardRecord",
    "Forwards",
    "Hello",
    "Images",
    "ImageInfo",
    "ImageConfig",
    "PullProgress",
    "RemovedImages",
    "Code",
    "State",
    "Outcome",
    *_errors.__all__,
    "LibraryError",
    "library_path",
    "__version__",
]

# Public classes print (and pickle) as sbx.Name rather than sbx._module.Name.
for _name in __all__:
    if isinstance(globals()[_name], type):
        globals()[_name].__module__ = __name__
del _name
