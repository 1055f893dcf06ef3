"""Client and Sandbox: the synchronous API over libsbx.

A :class:`Client` owns one ``sbx_client`` (one connection to sbxd) and a lock that
serialises every libsbx call on it, because libsbx's clients are not thread-safe. A
:class:`Sandbox` is a handle on one sandbox by ID through a Client. Every result libsbx
allocates is converted to Python objects and freed with its own ``*_free`` function
before the method returns, in a ``finally`` so that a failure in the conversion frees it
too; every input struct is built from ctypes objects that Python owns and that live
until the call has returned.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import socket
import threading
from ctypes import POINTER, byref, c_char_p, c_int, c_uint32, c_void_p
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from . import _lib as L

if TYPE_CHECKING:  # pragma: no cover
    from ._images import ImageInfo, Images
from ._errors import NotFound, SandboxEnded, SbxError, error_from_code
from ._types import (
    Code,
    CommandInfo,
    CommandRecord,
    ConnectionRecord,
    Connections,
    ForwardRecord,
    Forwards,
    CommandState,
    DirectoryListing,
    FileEvent,
    FileEventKind,
    FileInfo,
    FileType,
    Hello,
    History,
    NetworkMode,
    Outcome,
    PathArg,
    ReadChunk,
    ResourceLimits,
    ResourceReport,
    Result,
    SandboxInfo,
    SandboxList,
    SandboxPolicy,
    State,
    _env_list,
    _paths,
)

__all__ = ["Client", "Sandbox", "Command", "OutputCallback", "default_socket_path"]

#: ``on_output(stream, data)``: ``stream`` is ``"stdout"`` or ``"stderr"``, ``data`` the
#: bytes of the chunk, in order per stream.
OutputCallback = Callable[[str, bytes], None]

_DEFAULT_MAX_OUTPUT_BYTES = 1 << 20  # the daemon's default cap per stream


# ---- conversions ----------------------------------------------------------------------


def _enc(s: Union[str, "os.PathLike[str]", bytes]) -> bytes:
    """A str (or path) as the UTF-8 bytes libsbx takes; surrogate escapes round-trip the
    bytes of names that are not UTF-8."""
    if isinstance(s, bytes):
        return s
    return os.fspath(s).encode("utf-8", "surrogateescape")


def _dec(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "surrogateescape") if b else ""


def _dec_opt(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else b.decode("utf-8", "surrogateescape")


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _strv(v: L.Strv) -> Tuple[str, ...]:
    return tuple(_dec(v.v[i]) for i in range(v.n)) if v.v else ()


def _u32s(p: Any, n: int) -> Tuple[int, ...]:
    return tuple(int(p[i]) for i in range(n)) if p else ()


def _buf(p: Any, n: int) -> bytes:
    return ctypes.string_at(p, n) if p and n else b""


def _enforcement(p: Any, n: int) -> Dict[str, str]:
    return {_dec(p[i].limit): _dec(p[i].enforcement) for i in range(n)} if p else {}


class _CStrings:
    """A ``char **`` array built from Python strings, owned by this object."""

    def __init__(self, items: Sequence[Union[str, bytes, "os.PathLike[str]"]]) -> None:
        self.items = [_enc(s) for s in items]
        self.array = (c_char_p * max(len(self.items), 1))(*self.items)
        self.n = len(self.items)

    @property
    def ptr(self) -> Any:
        return self.array if self.n else None


def _policy_to_c(p: SandboxPolicy, out: L.Policy, keep: List[Any]) -> None:
    """Fills out (already sbx_policy_init()ed) from p; keep gets the owners of the memory
    out points to, which must outlive the call."""
    for name in ("writable_paths", "denied_read_paths", "denied_write_paths"):
        cs = _CStrings(getattr(p, name))
        keep.append(cs)
        sv = getattr(out, name)
        sv.v = ctypes.cast(cs.ptr, POINTER(c_char_p)) if cs.n else None
        sv.n = cs.n
    out.network = int(NetworkMode(p.network))
    for name in ("allowed_hosts", "allowed_cidrs"):
        cs = _CStrings(getattr(p, name))
        keep.append(cs)
        sv = getattr(out, name)
        sv.v = ctypes.cast(cs.ptr, POINTER(c_char_p)) if cs.n else None
        sv.n = cs.n
    out.protect_defaults = 1 if p.protect_defaults else 0
    if p.inherit_environment is not None:
        cs = _CStrings(p.inherit_environment)
        keep.append(cs)
        out.inherit_environment.v = ctypes.cast(cs.ptr, POINTER(c_char_p)) if cs.n else None
        out.inherit_environment.n = cs.n
        out.inherit_environment_set = 1
    lim = p.limits or ResourceLimits()
    cl = out.limits
    cl.set = 0
    for field, bit, kind in L.LIMITS:
        value = getattr(lim, field)
        if value is not None:
            cl.set |= bit
            setattr(cl, field, kind(value))
    if p.root_dir is not None:
        b = _enc(p.root_dir)
        keep.append(b)
        out.root_dir = b


def _policy_from_c(c: L.Policy) -> SandboxPolicy:
    lim = c.limits
    limits = {field: kind(getattr(lim, field)) if lim.set & bit else None
              for field, bit, kind in L.LIMITS}
    inherit = _strv(c.inherit_environment)
    return SandboxPolicy(
        writable_paths=_strv(c.writable_paths),
        denied_write_paths=_strv(c.denied_write_paths),
        denied_read_paths=_strv(c.denied_read_paths),
        network=NetworkMode(c.network),
        protect_defaults=bool(c.protect_defaults),
        inherit_environment=inherit if (c.inherit_environment_set or inherit) else None,
        limits=ResourceLimits(**limits),
        root_dir=_dec_opt(c.root_dir),
        allowed_hosts=_strv(c.allowed_hosts),
        allowed_cidrs=_strv(c.allowed_cidrs),
    )


def _sandbox_from_c(s: L.Sandbox) -> SandboxInfo:
    return SandboxInfo(
        id=_dec(s.id),
        state=State(s.state),
        owner_uid=int(s.owner_uid),
        labels={_dec(s.labels[i].key): _dec(s.labels[i].value) for i in range(s.n_labels)}
        if s.labels
        else {},
        created_unix_ms=int(s.created_unix_ms),
        deadline_unix_ms=int(s.deadline_unix_ms),
        idle_timeout_ms=int(s.idle_timeout_ms),
        ended_unix_ms=int(s.ended_unix_ms),
        end_reason=_dec_opt(s.end_reason),
        policy=_policy_from_c(s.policy),
        isolated=bool(s.isolated),
        warnings=_strv(s.warnings),
        enforcement=_enforcement(s.enforcement, s.n_enforcement),
        running_commands=int(s.running_commands),
        queued_commands=int(s.queued_commands),
        commands_run=int(s.commands_run),
        share_uids=_u32s(s.share_uids, s.n_share_uids),
        share_gids=_u32s(s.share_gids, s.n_share_gids),
        commands=tuple(_command_info_from_c(s.commands[i]) for i in range(s.n_commands))
        if s.commands
        else (),
        image=_dec_opt(s.image),
        image_digest=_dec_opt(s.image_digest),
    )


def _command_info_from_c(ci: L.CommandInfo) -> CommandInfo:
    ended = ci.state == CommandState.ENDED
    return CommandInfo(
        command_id=_dec(ci.command_id),
        argv=_strv(ci.argv),
        state=CommandState(ci.state),
        background=bool(ci.background),
        caller_uid=int(ci.caller_uid),
        started_unix_ms=int(ci.started_unix_ms),
        ended_unix_ms=int(ci.ended_unix_ms),
        outcome=Outcome(ci.outcome) if ended else None,
        exit_code=int(ci.exit_code) if ci.has_exit_code else None,
        tty=bool(ci.tty),
    )


def _exit_code(has_exit: int, code: int, has_signal: int, sig: int) -> Optional[int]:
    if has_exit:
        return int(code)
    if has_signal:
        return -int(sig)
    return None


def _file_from_c(f: L.FileInfo) -> FileInfo:
    return FileInfo(
        name=_dec(f.name),
        type=FileType(f.type),
        size=int(f.size),
        mode=int(f.mode),
        mtime_unix_ms=int(f.mtime_unix_ms),
        is_dir=bool(f.is_dir),
        symlink_target=_dec_opt(f.symlink_target),
    )


class _Collector:
    """The streaming callback of one run: forwards each chunk to the user's callback and
    keeps the last max_bytes of each stream (the daemon sends none in its result when it
    streams). An exception in the user's callback is kept, later chunks are still
    collected but no longer forwarded, and run() raises it once the command has ended
    (a callback cannot stop the command: libsbx has no way to cancel from inside it)."""

    def __init__(self, user: Optional[OutputCallback], max_bytes: int) -> None:
        self.user = user
        self.max_bytes = max_bytes
        self.data = {L.STDOUT: bytearray(), L.STDERR: bytearray()}
        self.total = {L.STDOUT: 0, L.STDERR: 0}
        self.error: Optional[BaseException] = None
        self.c_callback = L.OutputCallback(self._on_output)

    def _on_output(self, _ud: Any, stream: int, offset: int, data: Any, length: int) -> None:
        # Runs inside sbx_exec, on the calling thread, with the GIL re-taken by ctypes.
        try:
            chunk = ctypes.string_at(data, length) if length else b""
            if stream not in self.data:
                return
            buf = self.data[stream]
            buf += chunk
            if len(buf) > self.max_bytes:
                del buf[: len(buf) - self.max_bytes]
            self.total[stream] = max(self.total[stream], int(offset) + length)
            if self.user is not None and self.error is None:
                self.user("stdout" if stream == L.STDOUT else "stderr", chunk)
        except BaseException as e:  # noqa: BLE001 - re-raised by run()
            if self.error is None:
                self.error = e


def _result_from_c(r: L.Result, col: Optional[_Collector]) -> Result:
    out, err = _buf(r.stdout_data, r.stdout_len), _buf(r.stderr_data, r.stderr_len)
    out_total, err_total = int(r.stdout_bytes), int(r.stderr_bytes)
    out_trunc, err_trunc = bool(r.stdout_truncated), bool(r.stderr_truncated)
    if col is not None and not out and not err:
        out, err = bytes(col.data[L.STDOUT]), bytes(col.data[L.STDERR])
        out_total = max(out_total, col.total[L.STDOUT])
        err_total = max(err_total, col.total[L.STDERR])
        out_trunc = out_trunc or out_total > len(out)
        err_trunc = err_trunc or err_total > len(err)
    peak = int(r.peak_memory_bytes)
    source = _dec_opt(r.peak_memory_source)
    return Result(
        exit_code=_exit_code(r.has_exit_code, r.exit_code, r.has_signal, r.signal),
        stdout=_text(out),
        stderr=_text(err),
        stdout_bytes=out,
        stderr_bytes=err,
        timed_out=bool(r.timed_out),
        stdout_truncated=out_trunc,
        stderr_truncated=err_trunc,
        stdout_total_bytes=out_total,
        stderr_total_bytes=err_total,
        duration=float(r.duration),
        sandbox=_dec(r.sandbox_id),
        command_id=_dec(r.command_id),
        isolated=bool(r.isolated),
        warnings=_strv(r.warnings),
        resources=ResourceReport._from(
            _enforcement(r.enforcement, r.n_enforcement),
            peak_memory_bytes=peak if (peak or source) else None,
            peak_memory_source=source,
            cpu_seconds_used=float(r.cpu_seconds),
            limits_hit=_strv(r.limits_hit),
        ),
        outcome=Outcome(r.outcome),
        signal=int(r.signal) if r.has_signal else None,
        start_error=_dec_opt(r.start_error),
        start_errno=int(r.start_errno),
        owner_uid=int(r.owner_uid) if r.has_owner_uid else None,
        queued_ms=int(r.queued_ms),
        timeout=r.timeout_ms / 1000 if r.has_timeout_ms and r.timeout_ms else None,
    )


def _ms(seconds: Optional[float], what: str) -> int:
    if seconds is None:
        return 0
    if seconds < 0:
        raise ValueError(f"{what} must not be negative")
    ms = int(round(seconds * 1000))
    return ms if ms > 0 or seconds == 0 else 1


def _check_uint(what: str, v: int, bits: int) -> None:
    """v as a C unsigned integer of bits: out of range is a ValueError (ctypes would wrap
    it silently: after_seq=-1 read as the last page)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{what} must be an int, not {type(v).__name__}")
    if not 0 <= v < 2**bits:
        raise ValueError(f"{what} {v} is out of range: use 0 to {2**bits - 1}")


def _dim(v: Optional[int], what: str) -> int:
    """A terminal's rows or cols for libsbx: 0 for the default; the daemon judges the
    range (1 to 1000), but a value that does not fit 32 bits cannot be sent."""
    if v is None:
        return 0
    if not 0 < int(v) < 2**32:
        raise ValueError(f"{what} must be a positive number of characters, not {v!r}")
    return int(v)


def default_socket_path() -> str:
    """The socket libsbx uses when none is given: ``$SBX_SOCKET`` (a path or an
    ``ssh://`` URL), else ``/run/sbxd/sbxd.sock`` for root, else
    ``$XDG_RUNTIME_DIR/sbxd/sbxd.sock`` (or the system daemon's socket for a member of
    group sbxd without a daemon of their own)."""
    buf = ctypes.create_string_buffer(4096)
    if L.lib().sbx_default_socket_path(buf, len(buf)) < 0:
        raise OSError("the default socket path is too long")
    return _dec(buf.value)


# ---- Client ---------------------------------------------------------------------------


class Client:
    """A connection to sbxd.

    ``Client()`` connects to the default socket (see :func:`default_socket_path`);
    ``Client("/path/sbxd.sock")`` to another; ``Client("ssh://user@host")`` (or
    ``ssh://[user@]host[:port][/path/to/socket]``) to the daemon of another machine, through
    the system's ssh running ``sbx dial-stdio`` there, as libsbx does for every client
    (``SBX_SSH``, ``SBX_SSH_OPTS``, ``SBX_SSH_REMOTE_SBX``: see sbx(1), REMOTE DAEMONS).
    The connection, and that ssh process, are kept until :meth:`close`. ``call_timeout`` (seconds; ``None``: wait
    forever) bounds each wait for the daemon; a run waits for that plus the command's own
    timeout plus 2 s, plus its ``queue_timeout`` (60 s, the daemon's default, when not
    given). ``client_name`` is recorded by the daemon with each operation.

    Thread safety: one libsbx client is not thread-safe, so each Client holds a lock and
    runs one call at a time; a thread calling while another thread's ``run`` is in
    progress waits for it. Use one Client per thread (or per asyncio task) to run
    commands in parallel; Clients share nothing and may all attach the same sandbox.

    After a connection failure the next call connects again by itself; sandboxes are
    addressed by ID, so nothing is lost but the call that failed. Close the Client (or
    use it as a context manager) to release the connection; closing does not end any
    sandbox.
    """

    def __init__(
        self,
        socket: Optional[PathArg] = None,
        *,
        call_timeout: Optional[float] = None,
        client_name: str = "sbx-python",
    ) -> None:
        self._lib = L.lib()
        self._lock = threading.Lock()
        self._owner: Optional[int] = None
        self._c: Optional[int] = None
        #: The sbx_watch handles of watches still open (closed before the client is).
        self._watches: Set[int] = set()
        sock = _enc(socket) if socket is not None else None
        handle = c_void_p()
        code = self._lib.sbx_connect(sock, _enc(client_name), byref(handle))
        if code != Code.OK:
            if handle.value:
                msg = _dec(self._lib.sbx_error_message(handle))
                err = self._lib.sbx_errno(handle)
                self._lib.sbx_close(handle)
            else:
                msg, err = "out of memory in libsbx", 12
            raise error_from_code(code, msg, err)
        self._c = handle.value
        self.socket: str = _dec(sock) if sock is not None else default_socket_path()
        if call_timeout is not None:
            self._lib.sbx_set_call_timeout_ms(self._c, _ms(call_timeout, "call_timeout"))

    # -- plumbing --

    def _locked(self) -> "_Locked":
        return _Locked(self)

    def _raise(self, code: int, result: Optional[Result] = None) -> None:
        msg = _dec(self._lib.sbx_error_message(self._c))
        raise error_from_code(code, msg or Code(code).name, self._lib.sbx_errno(self._c), result)

    @property
    def closed(self) -> bool:
        return self._c is None

    def close(self) -> None:
        """Closes the connection (waits for a call in progress). Sandboxes live on."""
        with self._lock:
            if self._c is not None:
                for w in self._watches:
                    self._lib.sbx_watch_close(w)
                self._watches.clear()
                self._lib.sbx_close(self._c)
                self._c = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            c, self._c = getattr(self, "_c", None), None
            if c is not None:
                self._lib.sbx_close(c)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<sbx.Client {self.socket!r} {state}>"

    # -- daemon --

    @property
    def images(self) -> "Images":
        """Your container images: ``pull``, ``list``, ``inspect``, ``remove``, ``prune``
        (docs/images.md)."""
        from ._images import Images  # _images builds on this module

        return Images(self)

    def hello(self) -> Hello:
        """What the daemon said at connect time: its version and what this host allows."""
        ret = POINTER(L.Hello)()
        with self._locked() as c:
            code = self._lib.sbx_hello(c, byref(ret))
            if code != Code.OK:
                self._raise(code)
        try:
            h = ret.contents
            return Hello(
                protocol_version=int(h.protocol_version),
                daemon_version=_dec(h.daemon_version),
                cgroup_version=_dec(h.cgroup_version),
                user_namespaces=bool(h.user_namespaces),
                rootless=bool(h.rootless),
                seccomp=bool(h.seccomp),
                landlock_abi=int(h.landlock_abi),
                openat2=bool(h.openat2),
                max_frame_bytes=int(h.max_frame_bytes),
                peer_uid=int(h.peer_uid),
                implemented=tuple(_dec(h.implemented[i]) for i in range(h.n_implemented))
                if h.implemented
                else (),
                sandbox_uid_first=int(h.sandbox_uid_first),
                sandbox_uid_count=int(h.sandbox_uid_count),
                uid_reservation=_dec_opt(h.uid_reservation),
                uid_origin=_dec_opt(h.uid_origin),
            )
        finally:
            self._lib.sbx_hello_free(ret)

    # -- sandboxes --

    def create(
        self,
        policy: Optional[SandboxPolicy] = None,
        *,
        timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        id: Optional[str] = None,
        labels: Optional[Mapping[str, str]] = None,
        env: Optional[Mapping[str, str]] = None,
        network: Optional[NetworkMode] = None,
        writable: Iterable[PathArg] = (),
        limits: Optional[ResourceLimits] = None,
        allowed_hosts: Iterable[str] = (),
        allowed_cidrs: Iterable[str] = (),
        share_uids: Iterable[int] = (),
        share_gids: Iterable[int] = (),
        keep_workspace: bool = False,
        image: Optional[str] = None,
    ) -> "Sandbox":
        """Creates a sandbox and returns its handle.

        Args:
            policy: the :class:`SandboxPolicy` (default: read-only, no network).
            timeout: its lifetime in seconds (``None``: the daemon's default, a day);
                :meth:`Sandbox.set_timeout` moves it.
            idle_timeout: end it after this many seconds with no request and no running
                command (``None``: the daemon's default, an hour; ``0``: never).
            id: its ID (1 to 64 of ``A-Z a-z 0-9 . _ -``; IDs are never reused);
                ``None``: the daemon makes one.
            labels: key/value labels to find it by (:meth:`list`).
            env: environment variables of every command run in it.
            network: overrides ``policy.network``.
            writable: host paths added to ``policy.writable_paths``.
            limits: overrides ``policy.limits``.
            allowed_hosts, allowed_cidrs: added to the policy's; either implies
                ``network=NetworkMode.ALLOWLIST`` unless ``network`` says otherwise.
            share_uids, share_gids: users and groups that may use it too.
            keep_workspace: keep its /workspace on the host after it ends.
            image: start from this container image of yours (``"python:3.12-slim"``,
                a digest; pull it first): ``/`` is the image, writable, and its users,
                root included, exist inside (docs/images.md).

        The returned :class:`Sandbox` terminates the sandbox when used as a context
        manager (``with client.create() as sb:``).
        """
        keep: List[Any] = []
        o = self._create_opts(
            keep, policy, timeout=timeout, idle_timeout=idle_timeout, id=id, labels=labels,
            env=env, network=network, writable=writable, limits=limits,
            allowed_hosts=allowed_hosts, allowed_cidrs=allowed_cidrs, share_uids=share_uids,
            share_gids=share_gids, keep_workspace=keep_workspace, image=image)
        info = self._sandbox_call(self._lib.sbx_create, byref(o))
        return Sandbox(self, info.id, owned=True, info=info)

    def _create_opts(
        self,
        keep: List[Any],
        policy: Optional[SandboxPolicy],
        *,
        timeout: Optional[float],
        idle_timeout: Optional[float],
        id: Optional[str],
        labels: Optional[Mapping[str, str]],
        env: Optional[Mapping[str, str]],
        network: Optional[NetworkMode],
        writable: Iterable[PathArg],
        limits: Optional[ResourceLimits],
        allowed_hosts: Iterable[str],
        allowed_cidrs: Iterable[str],
        share_uids: Iterable[int],
        share_gids: Iterable[int],
        keep_workspace: bool,
        image: Optional[str],
    ) -> L.CreateOpts:
        """The struct sbx_create_opts of :meth:`create`'s arguments; keep gets the owners
        of the memory it points to, which must outlive its use."""
        p = policy or SandboxPolicy()
        hosts, cidrs = tuple(allowed_hosts), tuple(allowed_cidrs)
        if network is None and (hosts or cidrs):
            network = NetworkMode.ALLOWLIST
        if network is not None or writable or limits is not None or hosts or cidrs:
            p = SandboxPolicy(
                writable_paths=p.writable_paths + _paths(writable),
                denied_write_paths=p.denied_write_paths,
                denied_read_paths=p.denied_read_paths,
                network=p.network if network is None else network,
                protect_defaults=p.protect_defaults,
                inherit_environment=p.inherit_environment,
                limits=p.limits if limits is None else limits,
                root_dir=p.root_dir,
                allowed_hosts=p.allowed_hosts + hosts,
                allowed_cidrs=p.allowed_cidrs + cidrs,
            )
        o = L.CreateOpts()
        self._lib.sbx_create_opts_init(byref(o))
        if id is not None:
            o.id = _enc(id)
        _policy_to_c(p, o.policy, keep)
        o.timeout_ms = _ms(timeout, "timeout")
        o.idle_timeout_ms = (
            L.IDLE_TIMEOUT_NONE if idle_timeout == 0 else _ms(idle_timeout, "idle_timeout")
        )
        if labels:
            arr = (L.Label * len(labels))()
            for i, (k, v) in enumerate(labels.items()):
                arr[i].key, arr[i].value = _enc(k), _enc(v)
            keep.append(arr)
            o.labels, o.n_labels = arr, len(labels)
        envs = _CStrings(_env_list(env))
        keep.append(envs)
        if envs.n:
            o.env, o.n_env = ctypes.cast(envs.ptr, POINTER(c_char_p)), envs.n
        for attr, ids in (("share_uids", share_uids), ("share_gids", share_gids)):
            ids = [int(x) for x in ids]
            if ids:
                arr32 = (c_uint32 * len(ids))(*ids)
                keep.append(arr32)
                setattr(o, attr, ctypes.cast(arr32, POINTER(c_uint32)))
                setattr(o, "n_" + attr, len(ids))
        o.keep_workspace = 1 if keep_workspace else 0
        if image is not None:
            o.image = _enc(image)
        return o

    def attach(self, id: str) -> "Sandbox":
        """A handle on an existing sandbox (one another process created, say). Raises
        :class:`NotFound` when there is no such sandbox and :class:`SandboxEnded` when it
        has ended. Leaving a ``with`` block of an attached sandbox does not end it."""
        info = self.get(id)
        if info.ended:
            why = str(info.state)
            if info.end_reason and info.end_reason != why:
                why += f": {info.end_reason}"
            raise SandboxEnded(f"sandbox '{info.id}' has ended ({why}); create a new one")
        return Sandbox(self, info.id, owned=False, info=info)

    def get(self, id: str) -> SandboxInfo:
        """The description of sandbox ``id``, live or ended (while its records last): a
        :class:`SandboxInfo`, which runs nothing. To work in an existing sandbox (one
        this process or another created), :meth:`attach` it: ``client.attach(id).run(...)``."""
        return self._sandbox_call(self._lib.sbx_get, _enc(id))

    def list(
        self,
        *,
        labels: Optional[Mapping[str, str]] = None,
        states: Iterable[State] = (),
        owner_uid: Optional[int] = None,
        include_ended: bool = False,
        limit: int = 0,
    ) -> SandboxList:
        """The sandboxes the caller may use: live ones, or ended ones too with
        ``include_ended``; only those with all of ``labels``, in one of ``states``,
        owned by ``owner_uid``. At most ``limit`` (0: the daemon's default); the list's
        ``truncated`` says it was cut."""
        keep: List[Any] = []
        o = L.ListOpts()
        if labels:
            arr = (L.Label * len(labels))()
            for i, (k, v) in enumerate(labels.items()):
                arr[i].key, arr[i].value = _enc(k), _enc(v)
            keep.append(arr)
            o.labels, o.n_labels = arr, len(labels)
        st = [int(State(s)) for s in states]
        if st:
            sarr = (c_int * len(st))(*st)
            keep.append(sarr)
            o.states, o.n_states = ctypes.cast(sarr, POINTER(c_int)), len(st)
        if owner_uid is not None:
            o.has_owner_uid, o.owner_uid = 1, int(owner_uid)
        o.include_ended = 1 if include_ended else 0
        o.limit = int(limit)
        ret = POINTER(L.SandboxList)()
        with self._locked() as c:
            code = self._lib.sbx_list(c, byref(o), byref(ret))
            if code != Code.OK:
                self._raise(code)
        try:
            lst = ret.contents
            out = SandboxList(_sandbox_from_c(lst.v[i].contents) for i in range(lst.n))
            out.truncated = bool(lst.truncated)
            return out
        finally:
            self._lib.sbx_sandbox_list_free(ret)

    def _sandbox_call(self, fn: Callable[..., int], *args: Any) -> SandboxInfo:
        """fn(client, *args, &ret) for the calls that return one struct sbx_sandbox."""
        ret = POINTER(L.Sandbox)()
        with self._locked() as c:
            code = fn(c, *args, byref(ret))
            if code != Code.OK:
                self._lib.sbx_sandbox_free(ret)  # NULL on failure; freed if not
                self._raise(code)
        try:
            return _sandbox_from_c(ret.contents)
        finally:
            self._lib.sbx_sandbox_free(ret)

    def _status_call(self, fn: Callable[..., int], *args: Any) -> None:
        with self._locked() as c:
            code = fn(c, *args)
            if code != Code.OK:
                self._raise(code)


class _Locked:
    """``with client._locked() as c:`` holds the client's lock and yields its
    sbx_client pointer; it refuses a call from inside an output callback of a run on
    the same client (libsbx is not re-entrant) and a call on a closed client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def __enter__(self) -> int:
        cl = self.client
        me = threading.get_ident()
        if cl._owner == me:
            raise SbxError(
                "a call on a Client from inside its own output callback; libsbx is not "
                "re-entrant: use another Client"
            )
        cl._lock.acquire()
        if cl._c is None:
            cl._lock.release()
            raise SbxError("the Client is closed")
        cl._owner = me
        return cl._c

    def __exit__(self, *exc: Any) -> None:
        self.client._owner = None
        self.client._lock.release()


# ---- Sandbox --------------------------------------------------------------------------



def _command_record(r) -> CommandRecord:
    """One entry of a libsbx history page as the binding's record."""
    return CommandRecord(
        seq=int(r.seq),
        command_id=_dec(r.command_id),
        argv=_strv(r.argv),
        cwd=_dec(r.cwd),
        caller_uid=int(r.caller_uid),
        caller_pid=int(r.caller_pid),
        client_name=_dec(r.client_name),
        started_unix_ms=int(r.started_unix_ms),
        ended_unix_ms=int(r.ended_unix_ms),
        outcome=Outcome(r.outcome),
        exit_code=_exit_code(r.has_exit_code, r.exit_code, r.has_signal, r.signal),
        signal=int(r.signal) if r.has_signal else None,
        duration=float(r.duration),
        peak_memory_bytes=int(r.peak_memory_bytes),
        stdout_total_bytes=int(r.stdout_bytes),
        stderr_total_bytes=int(r.stderr_bytes),
        stdout_truncated=bool(r.stdout_truncated),
        stderr_truncated=bool(r.stderr_truncated),
        queued_ms=int(r.queued_ms),
        background=bool(r.background),
        tty=bool(r.tty),
    )


def _connection_record(r) -> ConnectionRecord:
    """One entry of a libsbx connections page as the binding's record."""
    return ConnectionRecord(
        seq=int(r.seq),
        started_unix_ms=int(r.started_unix_ms),
        ended_unix_ms=int(r.ended_unix_ms),
        host=_dec_opt(r.host),
        port=int(r.port),
        address=_dec_opt(r.address),
        allowed=bool(r.allowed),
        reason=_dec_opt(r.reason),
        method=_dec_opt(r.method),
        bytes_sent=int(r.bytes_sent),
        bytes_received=int(r.bytes_received),
    )


def _forward_record(r) -> ForwardRecord:
    """One entry of a libsbx forwards page as the binding's record."""
    return ForwardRecord(
        seq=int(r.seq),
        caller_uid=int(r.caller_uid),
        caller_pid=int(r.caller_pid),
        client_name=_dec_opt(r.client_name),
        port=int(r.port),
        address=_dec_opt(r.address),
        opened_unix_ms=int(r.opened_unix_ms),
        closed_unix_ms=int(r.closed_unix_ms),
        bytes_in=int(r.bytes_in),
        bytes_out=int(r.bytes_out),
        reason=_dec_opt(r.reason),
    )


class Sandbox:
    """A handle on one sandbox, by ID, through a :class:`Client`.

    Get one from :meth:`Client.create` (the handle *owns* the sandbox: leaving a
    ``with`` block terminates it) or :meth:`Client.attach` (it does not). The handle
    holds no state of its own besides the ID: several handles, in several processes,
    may use one sandbox at once. Every method raises a subclass of
    :class:`SbxError`; one on a sandbox that has ended raises :class:`SandboxEnded`.
    """

    def __init__(
        self, client: Client, id: str, *, owned: bool = False, info: Optional[SandboxInfo] = None
    ) -> None:
        self.client = client
        self.id = id
        self.owned = owned
        self._info = info
        self._bid = _enc(id)

    def __repr__(self) -> str:
        return f"<sbx.Sandbox {self.id!r}{' owned' if self.owned else ''}>"

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.owned:
            self.terminate()  # idempotent: fine when it has ended already

    # -- state --

    def info(self) -> SandboxInfo:
        """The sandbox as the daemon describes it now (state, policy, deadline...)."""
        self._info = self.client.get(self.id)
        return self._info

    def set_timeout(self, timeout: float) -> SandboxInfo:
        """Moves the sandbox's deadline to ``timeout`` seconds from now."""
        self._info = self.client._sandbox_call(
            self.client._lib.sbx_set_timeout, self._bid, _ms(timeout, "timeout")
        )
        return self._info

    def terminate(self) -> SandboxInfo:
        """Ends the sandbox and every process in it and returns its final state (also
        when it had ended already: terminating is idempotent)."""
        self._info = self.client._sandbox_call(self.client._lib.sbx_terminate, self._bid)
        return self._info

    # -- snapshots (docs/snapshots.md) --

    def snapshot(self, name: Optional[str] = None) -> "ImageInfo":
        """Captures this sandbox's files (its root and ``/workspace``; a sandbox made from
        an image) as an image: ``client.create(image=snap.names[0])`` starts from them."""
        return self.client.images.snapshot(self.id, name)

    def restore(self, snapshot: Union[str, "ImageInfo"]) -> SandboxInfo:
        """Puts this sandbox's files back to ``snapshot``'s (its name or digest, or the
        ``ImageInfo`` that :meth:`snapshot` returned): every process in it is ended first,
        its root and ``/workspace`` become the snapshot's; its ID, policy, deadline and
        history stay. A failure leaves the sandbox as it was."""
        ref = snapshot if isinstance(snapshot, str) else snapshot.digest
        if not ref:
            raise ValueError("restore: name the snapshot")
        self._info = self.client._sandbox_call(
            self.client._lib.sbx_restore, self._bid, ref.encode()
        )
        return self._info

    def fork(
        self,
        n: int = 1,
        *,
        name: Optional[str] = None,
        policy: Optional[SandboxPolicy] = None,
        timeout: Optional[float] = None,
        idle_timeout: Optional[float] = None,
        labels: Optional[Mapping[str, str]] = None,
        env: Optional[Mapping[str, str]] = None,
        network: Optional[NetworkMode] = None,
        writable: Iterable[PathArg] = (),
        limits: Optional[ResourceLimits] = None,
        allowed_hosts: Iterable[str] = (),
        allowed_cidrs: Iterable[str] = (),
        share_uids: Iterable[int] = (),
        share_gids: Iterable[int] = (),
        keep_workspace: bool = False,
    ) -> List["Sandbox"]:
        """``n`` new sandboxes with this one's files at one instant (one snapshot, named
        ``name`` or the default) and its settings; owned handles (a ``with`` block
        terminates each). Processes are not copied: start them again. All or nothing.

        The other arguments are :meth:`Client.create`'s (but ``id`` and ``image``), over
        this sandbox's settings: ``policy`` replaces its policy, ``network`` and
        ``idle_timeout`` its values, and the limits ``limits`` sets replace its own (those
        it leaves ``None`` stay); ``labels`` replace its labels of the same keys;
        ``writable``, ``allowed_hosts``, ``allowed_cidrs``, ``share_uids`` and
        ``share_gids`` add to its lists. Its allowlist stays only while the network stays
        :attr:`NetworkMode.ALLOWLIST`. ``timeout``, ``env`` and ``keep_workspace`` are as
        for ``create`` (a sandbox does not tell its own). A value the daemon refuses
        raises before any fork runs (the snapshot stays, as an image)."""
        if n < 1:
            raise ValueError("fork: n must be at least 1")
        c = self.client
        src = self.info()
        p = policy or src.policy
        hosts, cidrs = tuple(allowed_hosts), tuple(allowed_cidrs)
        if network is None:
            network = NetworkMode.ALLOWLIST if hosts or cidrs else p.network
        if NetworkMode(network) != NetworkMode.ALLOWLIST:
            p = dataclasses.replace(p, allowed_hosts=(), allowed_cidrs=())
        if limits is not None:
            given = {f.name: getattr(limits, f.name) for f in dataclasses.fields(limits)}
            p = dataclasses.replace(p, limits=dataclasses.replace(
                p.limits, **{k: v for k, v in given.items() if v is not None}))
        keep: List[Any] = []
        o = c._create_opts(
            keep, p, timeout=timeout, idle_timeout=idle_timeout, id=None,
            labels={**src.labels, **(labels or {})}, env=env, network=network,
            writable=writable, limits=None, allowed_hosts=hosts, allowed_cidrs=cidrs,
            share_uids=src.share_uids + tuple(int(u) for u in share_uids),
            share_gids=src.share_gids + tuple(int(g) for g in share_gids),
            keep_workspace=keep_workspace, image=None)
        if idle_timeout is None:
            o.idle_timeout_ms = src.idle_timeout_ms or L.IDLE_TIMEOUT_NONE
        opts = L.ForkOpts(count=n, snapshot_name=name.encode() if name else None,
                          create=ctypes.pointer(o))
        ret = POINTER(L.Fork)()
        with c._locked() as h:
            code = c._lib.sbx_fork(h, self._bid, byref(opts), byref(ret))
            if code != Code.OK:
                c._raise(code)
        try:
            f = ret.contents
            return [Sandbox(c, f.ids[i].decode(), owned=True) for i in range(f.n)]
        finally:
            c._lib.sbx_fork_free(ret)

    # -- commands --

    def run(
        self,
        command: Union[str, Sequence[str]],
        *,
        timeout: Optional[float] = None,
        cwd: Optional[PathArg] = None,
        env: Optional[Mapping[str, str]] = None,
        stdin: Union[None, str, bytes, int, Any] = None,
        max_output_bytes: Optional[int] = None,
        on_output: Optional[OutputCallback] = None,
        on_started: Optional[Callable[[str], None]] = None,
        queue_timeout: Optional[float] = None,
        on_queued: Optional[Callable[[str, int], None]] = None,
        check: bool = False,
        background: bool = False,
        stdin_open: bool = False,
        tty: bool = False,
        rows: Optional[int] = None,
        cols: Optional[int] = None,
        user: Optional[str] = None,
    ) -> Any:
        """Runs a command in the sandbox and returns its :class:`Result` once it ended.

        Args:
            command: a ``str`` runs through ``/bin/sh -c``; a list is the argv, as is.
            timeout: seconds before the command is killed. ``None`` (the default): 60 s,
                the library's default; with ``background``, none. ``0`` (none) is for
                ``background`` only: without it, :class:`ValueError`. More than the
                daemon's ``--max-command-timeout`` raises :class:`InvalidArgument`.
            cwd: the working directory (default ``/workspace``).
            env: variables added to the sandbox's environment for this command.
            stdin: ``str`` or ``bytes`` fed to the command's stdin; or a readable file
                object with ``fileno()`` (or an int fd) whose contents are streamed to
                it until end of file.
            max_output_bytes: the most of each stream kept (the tail; default 1 MiB).
            on_output: ``on_output(stream, data)`` called with each chunk as it comes
                (``stream`` is ``"stdout"`` or ``"stderr"``), on this thread, before run
                returns. An exception it raises is re-raised by run after the command
                ended. It must not call this Client (use another one).
            on_started: ``on_started(command_id)`` called once the command has started,
                before any output, on this thread: from then on another thread can
                :meth:`cancel` it or send it a :meth:`signal` through another Client.
                An exception it raises is re-raised by run after the command ended.
            queue_timeout: seconds the command may wait for a slot when the sandbox
                already runs its maximum of commands at once (``ResourceLimits.commands``;
                other clients may share the sandbox). ``None``: the daemon's default (60
                s); ``0``: do not wait (no free slot raises :class:`ResourceExhausted` at
                once). A command that gets no slot in time never runs: its result's
                ``outcome`` is :attr:`Outcome.QUEUE_TIMEOUT`. ``timeout`` counts from the
                start, not from the call. Otherwise only a full queue raises
                (:class:`ResourceExhausted`).
            on_queued: ``on_queued(command_id, ahead)`` called when the command waits
                for a slot, with the number of commands that wait before it, on this
                thread, before ``on_started``; from then on :meth:`cancel` (through
                another Client) ends the wait. An exception it raises is re-raised by
                run after the command ended.
            check: raise instead of returning a result that did not succeed:
                :class:`Timeout`, :class:`SandboxEnded` or :class:`CommandFailed`.
            background: start the command and return a :class:`Command` handle at once
                (as E2B's ``commands.run(background=True)``): it outlives this call and
                this Client, keeps its output (the tail within ``max_output_bytes``) for
                :meth:`Command.attach` / :meth:`Command.wait` from any Client that may
                use the sandbox. It has no timeout unless ``timeout`` gives one (``0``:
                none too): it runs until it exits, is killed, or the sandbox ends.
                ``on_output``, ``on_started``,
                ``on_queued``, ``check`` and a streamed ``stdin`` do not apply. A
                program that cannot start returns a handle whose :meth:`Command.wait`
                gives the ``START_FAILED`` result at once.
            stdin_open: with ``background``: keep its stdin open for
                :meth:`Command.send_stdin` (until ``eof=True``).
            tty: run the command on a pseudo-terminal of the sandbox's own devpts: its
                stdin, stdout and stderr are the terminal (REPLs, ``bash -i``, ``top``
                work), everything it prints comes as stdout (with ``\r\n``), and the end
                of ``stdin`` is the terminal's end-of-file character (^D).
            rows, cols: the terminal's size (default 24 x 80; 1 to 1000 each, else
                :class:`InvalidArgument`); :meth:`resize` changes it while it runs.
            user: in a sandbox made from an image, the user to run as (a name of the
                image's, ``"UID"`` or ``"UID:GID"``; ``"root"``); ``None``: the image's.

        A command that exits non-zero, times out or is killed is a result, not an
        exception (unless ``check``). Exceptions are for what kept it from being run:
        :class:`SandboxEnded`, :class:`NotFound` (no such sandbox), ...

        The call waits in libsbx with the GIL released (other threads run), and a
        signal such as Ctrl-C is handled once it returns: at the latest after
        ``timeout``.
        """
        keep: List[Any] = []
        if timeout == 0 and not background:
            raise ValueError(
                "run: timeout=0 (no timeout) is for background=True only: a command run() "
                "waits for needs a timeout above 0 (default 60 s)")
        o = L.ExecOpts()
        self.client._lib.sbx_exec_opts_init(byref(o))
        if isinstance(command, (str, bytes)):
            o.shell = _enc(command)
        else:
            argv = _CStrings(list(command))
            if argv.n == 0:
                raise ValueError("run: empty argv")
            keep.append(argv)
            o.argv, o.argc = ctypes.cast(argv.ptr, POINTER(c_char_p)), argv.n
        if cwd is not None:
            o.cwd = _enc(cwd)
        envs = _CStrings(_env_list(env))
        keep.append(envs)
        if envs.n:
            o.env, o.n_env = ctypes.cast(envs.ptr, POINTER(c_char_p)), envs.n
        if isinstance(stdin, str):
            stdin = stdin.encode("utf-8")
        if isinstance(stdin, (bytes, bytearray, memoryview)):
            data = bytes(stdin)
            sbuf = ctypes.create_string_buffer(data, len(data) or 1)
            keep.append(sbuf)
            o.stdin_data = ctypes.cast(sbuf, c_void_p)
            o.stdin_len = len(data)
        elif stdin is not None:
            fd = stdin if isinstance(stdin, int) else stdin.fileno()
            o.stdin_stream, o.stdin_fd = 1, int(fd)
        o.timeout_ms = _ms(timeout, "timeout")
        o.tty = 1 if tty else 0
        o.rows, o.cols = _dim(rows, "rows"), _dim(cols, "cols")
        if user is not None:
            o.user = _enc(user)
        if max_output_bytes is not None:
            if max_output_bytes <= 0:
                raise ValueError("max_output_bytes must be positive")
            o.max_stdout_bytes = o.max_stderr_bytes = int(max_output_bytes)
        col = None
        if on_output is not None:
            col = _Collector(on_output, int(max_output_bytes or _DEFAULT_MAX_OUTPUT_BYTES))
            o.on_output = col.c_callback
        started_error: List[BaseException] = []
        if on_started is not None:
            user_started = on_started

            def _started(_ud: Any, command_id: bytes) -> None:
                try:
                    user_started(_dec(command_id))
                except BaseException as e:  # noqa: BLE001 - re-raised below
                    started_error.append(e)

            started_cb = L.StartedCallback(_started)
            keep.append(started_cb)
            o.on_started = started_cb
        if queue_timeout is not None:
            o.has_queue_timeout = 1
            o.queue_timeout_ms = _ms(queue_timeout, "queue_timeout")
        if on_queued is not None:
            user_queued = on_queued

            def _queued(_ud: Any, command_id: bytes, ahead: int) -> None:
                try:
                    user_queued(_dec(command_id), int(ahead))
                except BaseException as e:  # noqa: BLE001 - re-raised below
                    started_error.append(e)

            queued_cb = L.QueuedCallback(_queued)
            keep.append(queued_cb)
            o.on_queued = queued_cb
        if background:
            if col is not None or on_started or on_queued or o.stdin_stream:
                raise ValueError(
                    "run(background=True) takes no on_output, on_started, on_queued nor a "
                    "streamed stdin: attach to the command for its output"
                )
            # No timeout of its own unless one is given (timeout=0: none as well).
            o.no_timeout = 1 if not timeout else 0
            o.stdin_stream = 1 if stdin_open else 0
            return self._start_background(o)
        ret = POINTER(L.Result)()
        with self.client._locked() as c:
            code = self.client._lib.sbx_exec(c, self._bid, byref(o), byref(ret))
            try:
                result = _result_from_c(ret.contents, col) if ret else None
            finally:
                self.client._lib.sbx_result_free(ret)
            if code != Code.OK:
                self.client._raise(code, result)
        if started_error:
            raise started_error[0]
        if col is not None and col.error is not None:
            raise col.error
        assert result is not None
        return result.check() if check else result

    def _start_background(self, o: L.ExecOpts) -> "Command":
        ret = POINTER(L.Background)()
        with self.client._locked() as c:
            code = self.client._lib.sbx_exec_background(c, self._bid, byref(o), byref(ret))
            if code != Code.OK:
                self.client._raise(code)
        try:
            b = ret.contents
            result = _result_from_c(b.result.contents, None) if b.result else None
            return Command(self, _dec(b.command_id), bool(b.queued), int(b.ahead), result)
        finally:
            self.client._lib.sbx_background_free(ret)

    def command(self, command_id: str) -> "Command":
        """A handle on a command of this sandbox by ID (as E2B's ``connect(pid)``): a
        background one started by any client, or any running one."""
        return Command(self, command_id, False, 0, None)

    def cancel(self, command_id: str) -> None:
        """Kills a running command (from another Client than the one waiting in its
        ``run``); its result's outcome becomes ``cancelled``."""
        self.client._status_call(self.client._lib.sbx_cancel, self._bid, _enc(command_id))

    def signal(self, command_id: str, signo: int) -> None:
        """Sends ``signo`` (``signal.SIGINT``, ``SIGTERM``, ``SIGHUP``, ``SIGQUIT``,
        ``SIGUSR1``, ``SIGUSR2``; ``SIGKILL`` is :meth:`cancel`) to the process group of
        a running command, as Ctrl-C in a terminal does; the command may catch it, and
        its result says how it ended. Another signal raises :class:`InvalidArgument`.
        Call it from another Client than the one waiting in ``run`` (the command's ID
        comes from ``run(on_started=...)``)."""
        self.client._status_call(
            self.client._lib.sbx_signal, self._bid, _enc(command_id), int(signo)
        )

    def resize(self, command_id: str, rows: int, cols: int) -> None:
        """Resizes the terminal of a running command started with ``run(tty=True)``
        to ``rows`` x ``cols`` (1 to 1000 each, else :class:`InvalidArgument`); its
        foreground process group gets SIGWINCH. A command without a terminal raises
        :class:`FailedPrecondition`. Like :meth:`signal`, call it from another Client
        than the one waiting in ``run``."""
        self.client._status_call(
            self.client._lib.sbx_resize, self._bid, _enc(command_id), int(rows), int(cols)
        )

    def history(self, *, after_seq: int = 0, limit: int = 0) -> History:
        """The commands this sandbox ran, oldest first, after sequence number
        ``after_seq``, at most ``limit`` (0: the daemon's default)."""
        return self._page(
            L.History,
            self.client._lib.sbx_history,
            self.client._lib.sbx_history_free,
            History,
            _command_record,
            after_seq,
            limit,
        )

    def connections(self, *, after_seq: int = 0, limit: int = 0) -> Connections:
        """The connections this (allowlist) sandbox's proxy allowed and refused, oldest
        first, after sequence number ``after_seq``, at most ``limit`` (0: the daemon's
        default)."""
        return self._page(
            L.Connections,
            self.client._lib.sbx_connections,
            self.client._lib.sbx_connections_free,
            Connections,
            _connection_record,
            after_seq,
            limit,
        )

    def forwards(self, *, after_seq: int = 0, limit: int = 0) -> Forwards:
        """The streams opened to this sandbox's ports (:meth:`open_port`,
        :meth:`forward`, ``sbx port-forward``), oldest first, after sequence number
        ``after_seq``, at most ``limit`` (0: the daemon's default)."""
        return self._page(
            L.Forwards,
            self.client._lib.sbx_forwards,
            self.client._lib.sbx_forwards_free,
            Forwards,
            _forward_record,
            after_seq,
            limit,
        )

    def _page(self, struct, call, free, page_cls, record, after_seq: int, limit: int):
        """One page of records (sbx_history, sbx_connections, sbx_forwards): each entry made by
        ``record``, gathered in a ``page_cls`` with its paging fields."""
        _check_uint("after_seq", after_seq, 64)
        _check_uint("limit", limit, 32)
        ret = POINTER(struct)()
        with self.client._locked() as c:
            code = call(c, self._bid, int(after_seq), int(limit), byref(ret))
            if code != Code.OK:
                self.client._raise(code)
        try:
            h = ret.contents
            out = page_cls(record(h.v[i]) for i in range(h.n))
            out.next_after_seq = int(h.next_after_seq)
            out.truncated = bool(h.truncated)
            return out
        finally:
            free(ret)

    # -- files --

    def read_chunk(self, path: PathArg, offset: int = 0, limit: int = 0) -> ReadChunk:
        """Reads at most ``limit`` bytes of ``path`` from ``offset`` (0: the rest of the
        file, refused with :class:`TooLarge` above the daemon's 5 MiB read limit)."""
        ret = POINTER(L.ReadResult)()
        with self.client._locked() as c:
            code = self.client._lib.sbx_read(c, self._bid, _enc(path), int(offset), int(limit), byref(ret))
            if code != Code.OK:
                self.client._raise(code)
        try:
            r = ret.contents
            return ReadChunk(
                data=_buf(r.data, r.len),
                size=int(r.size),
                next_offset=int(r.next_offset),
                eof=bool(r.eof),
            )
        finally:
            self.client._lib.sbx_read_result_free(ret)

    def read_file(self, path: PathArg, *, offset: int = 0, limit: Optional[int] = None) -> bytes:
        """The bytes of a file in the sandbox (a relative path is under /workspace).
        Without ``limit``, the whole rest of the file from ``offset``; a file over the
        daemon's read limit (5 MiB) raises :class:`TooLarge`: page it with ``offset``
        and ``limit`` or :meth:`read_chunk`."""
        return self.read_chunk(path, offset, limit or 0).data

    def read_text(self, path: PathArg, *, encoding: str = "utf-8", errors: str = "replace") -> str:
        """A file decoded as text (undecodable bytes replaced by default)."""
        return self.read_file(path).decode(encoding, errors)

    def write_file(
        self,
        path: PathArg,
        data: Union[str, bytes],
        *,
        mode: int = 0o644,
        create_parents: bool = True,
        append: bool = False,
    ) -> None:
        """Writes ``data`` (``str`` as UTF-8) to ``path``, replacing the file atomically
        (or appending with ``append``), creating missing parent directories unless
        ``create_parents`` is false. Raises :class:`ReadOnly` outside the sandbox's
        writable paths and :class:`TooLarge` above the daemon's frame limit."""
        b = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        flags = (L.WRITE_CREATE_PARENTS if create_parents else 0) | (L.WRITE_APPEND if append else 0)
        self.client._status_call(
            self.client._lib.sbx_write, self._bid, _enc(path), b, len(b), int(mode), flags
        )

    def list_directory(self, path: PathArg = "/workspace", *, limit: int = 0) -> DirectoryListing:
        """The entries of a directory, sorted by name, at most ``limit`` (0: the daemon's
        default); the listing's ``truncated`` says it was cut."""
        ret = POINTER(L.DirList)()
        with self.client._locked() as c:
            code = self.client._lib.sbx_list_dir(c, self._bid, _enc(path), int(limit), byref(ret))
            if code != Code.OK:
                self.client._raise(code)
        try:
            d = ret.contents
            out = DirectoryListing(_file_from_c(d.v[i]) for i in range(d.n))
            out.truncated = bool(d.truncated)
            return out
        finally:
            self.client._lib.sbx_dir_list_free(ret)

    def stat(self, path: PathArg) -> FileInfo:
        """What ``path`` is (type, size, mode, mtime); :class:`NotFound` when missing."""
        ret = POINTER(L.FileInfo)()
        with self.client._locked() as c:
            code = self.client._lib.sbx_stat(c, self._bid, _enc(path), byref(ret))
            if code != Code.OK:
                self.client._raise(code)
        try:
            return _file_from_c(ret.contents)
        finally:
            self.client._lib.sbx_file_info_free(ret)

    def exists(self, path: PathArg) -> bool:
        """Whether ``path`` exists in the sandbox (and is not hidden by its policy)."""
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def mkdir(self, path: PathArg, *, mode: int = 0o755, parents: bool = False) -> None:
        """Creates a directory (with its missing parents when ``parents``)."""
        self.client._status_call(self.client._lib.sbx_mkdir, self._bid, _enc(path), int(mode), 1 if parents else 0)

    def remove(self, path: PathArg, *, recursive: bool = False) -> None:
        """Removes a file or an empty directory; a directory with its contents when
        ``recursive`` (else :class:`FailedPrecondition` for a non-empty one)."""
        self.client._status_call(self.client._lib.sbx_remove, self._bid, _enc(path), 1 if recursive else 0)


    def watch(
        self, path: PathArg = "/workspace", *, recursive: bool = True, coalesce_ms: int = 100
    ) -> Iterator[FileEvent]:
        """The changes under the directory ``path`` of the sandbox, as a generator of
        :class:`FileEvent`: ``for ev in sandbox.watch("/workspace"): ...``. The watch is
        set up when this returns (every change after it is seen); changes are coalesced
        per path over ``coalesce_ms`` (10..5000). An ``OVERFLOW`` event says changes were
        lost: list the directory again. The generator runs until it is closed (``break``
        out of the loop, ``close()``, or it is collected), which stops the watch; it
        raises :class:`SandboxEnded` when the sandbox ends, :class:`Unavailable` when it
        is restored from a snapshot (watch again) and :class:`NotFound` when the
        directory goes away. Meanwhile the Client makes no other call (each raises
        :class:`FailedPrecondition`): use another Client for them. Refused up front:
        :class:`NotFound` for a missing or hidden path, :class:`InvalidArgument` for a
        file, :class:`ResourceExhausted` past the daemon's bounds on watches."""
        cl = self.client
        o = L.WatchOpts(recursive=1 if recursive else 0, coalesce_ms=int(coalesce_ms))
        w = c_void_p()
        with cl._locked() as c:
            code = cl._lib.sbx_watch_open(c, self._bid, _enc(path), byref(o), byref(w))
            if code != Code.OK:
                cl._raise(code)
            cl._watches.add(w.value)
        return self._watch_events(w.value)

    def _watch_events(self, w: int) -> Iterator[FileEvent]:
        cl = self.client
        try:
            while True:
                ret = POINTER(L.FileEvents)()
                with cl._locked():
                    # A short wait, so that Ctrl-C (KeyboardInterrupt) is seen promptly.
                    code = cl._lib.sbx_watch_next(w, 200, byref(ret))
                    if code != Code.OK:
                        cl._raise(code)
                if not ret:
                    continue
                try:
                    events = _file_events(ret.contents)
                finally:
                    cl._lib.sbx_file_events_free(ret)
                yield from events
        finally:
            with cl._lock:
                if w in cl._watches:
                    cl._watches.discard(w)
                    cl._lib.sbx_watch_close(w)

    # -- ports --

    def open_port(self, port: int, address: Optional[str] = None) -> socket.socket:
        """A stream to ``port`` of the sandbox's own loopback (what a server in the
        sandbox listens on; ``address`` "127.0.0.1", the default, or "::1"), as a
        connected, blocking :class:`socket.socket` of its own: read, write,
        ``shutdown(SHUT_WR)`` (the server sees the end) and close it. It goes over a
        new connection to the daemon, not the client's. :class:`Unavailable` when
        nothing listens there (the message names the port), :class:`NotFound` for a
        sandbox that is not the caller's, :class:`ResourceExhausted` at a bound. Over
        ssh:// the server's end ends the whole stream (libsbx(3))."""
        if isinstance(port, bool) or not isinstance(port, int):
            raise TypeError(f"port must be an int, not {type(port).__name__}")
        if not 1 <= port <= 65535:
            raise ValueError(f"port {port} is out of range: use 1 to 65535")
        fd = c_int(-1)
        with self.client._locked() as c:
            code = self.client._lib.sbx_open_port(
                c, self._bid, port, _enc(address) if address else None, byref(fd))
            if code != Code.OK:
                self.client._raise(code)
        return socket.socket(fileno=fd.value)

    def forward(self, port: int, *, local_port: int = 0, host: str = "127.0.0.1") -> "Forward":
        """Listens on ``host``:``local_port`` (0: a free port; loopback by default) and
        carries each connection to ``port`` of the sandbox (:meth:`open_port`), served
        by a background thread (a thread per direction of each connection) until
        :meth:`Forward.close` (or the end of a ``with`` block). ``.port`` is the local
        port, ``.url`` ``http://host:port/``. A connection whose stream cannot be
        opened is closed, and ``.last_error`` says why."""
        return Forward(self, port, local_port, host)


def _file_events(b: L.FileEvents) -> List[FileEvent]:
    """A batch of libsbx's as the binding's events (an overflow first)."""
    out: List[FileEvent] = []
    if b.overflow:
        out.append(FileEvent(FileEventKind.OVERFLOW, "", reason=_dec(b.overflow_reason)))
    for i in range(b.n):
        e = b.v[i]
        out.append(FileEvent(FileEventKind(e.kind), _dec(e.path), _dec_opt(e.old_path), bool(e.is_dir)))
    return out


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copies src to dst until src's end, then passes the end on (a half-close)."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class Forward:
    """A local listening socket whose connections go to a port of a sandbox; see
    :meth:`Sandbox.forward`. ``close()`` stops it and closes its connections."""

    def __init__(self, sandbox: "Sandbox", port: int, local_port: int, host: str) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"port {port!r} is out of range: use 1 to 65535")
        self.sandbox = sandbox
        self.sandbox_port = port
        self.host = host
        self.last_error: Optional[str] = None
        self._conns: set = set()
        self._lock = threading.Lock()
        self._closed = False
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, local_port))
            self._listener.listen(128)
        except OSError:
            self._listener.close()
            raise
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name=f"sbx-forward-{self.port}",
                                        daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}/"

    def __repr__(self) -> str:
        return f"<sbx.Forward {self.url} -> {self.sandbox.id}:{self.sandbox_port}>"

    def __enter__(self) -> "Forward":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _track(self, *socks: socket.socket, add: bool) -> bool:
        with self._lock:
            if add and self._closed:
                return False
            for s in socks:
                (self._conns.add if add else self._conns.discard)(s)
            return True

    def _relay(self, conn: socket.socket) -> None:
        try:
            far = self.sandbox.open_port(self.sandbox_port)
        except SbxError as e:
            self.last_error = str(e)
            conn.close()
            return
        if self._track(conn, far, add=True):
            back = threading.Thread(target=_pump, args=(far, conn), daemon=True)
            back.start()
            _pump(conn, far)
            back.join()
            self._track(conn, far, add=False)
        conn.close()
        far.close()

    def close(self) -> None:
        """Stops listening and ends every connection it carries. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join()


class Command:
    """A command of a sandbox, by ID: what ``Sandbox.run(..., background=True)`` returns
    (or ``Sandbox.command(id)``). Any Client that may use the sandbox can follow it, feed
    it and stop it; the daemon keeps a background command's output (the tail) and, once
    it ended, its result, for the sandbox's last 16 ended background commands."""

    def __init__(
        self, sandbox: Sandbox, command_id: str, queued: bool, ahead: int, result: Optional[Result]
    ) -> None:
        self.sandbox = sandbox
        #: ``"c-N"``.
        self.command_id = command_id
        #: It waited for a slot when started (``ahead`` commands before it).
        self.queued = queued
        self.ahead = ahead
        self._never_ran = result

    def __repr__(self) -> str:
        return f"<sbx.Command {self.command_id} of {self.sandbox.id}>"

    def attach(
        self,
        *,
        follow: bool = False,
        on_stdout: Optional[Callable[[bytes], None]] = None,
        on_stderr: Optional[Callable[[bytes], None]] = None,
        timeout: Optional[float] = None,
        stdout_offset: int = 0,
        stderr_offset: int = 0,
    ) -> Result:
        """The output it kept (from the offsets, counted over all it printed), and with
        ``follow`` what it prints until it ends, then its :class:`Result`. Without
        ``follow``, or when ``timeout`` (seconds) runs out first, the result of a command
        still running says ``outcome`` :attr:`Outcome.RUNNING` (the command goes on).
        ``on_stdout`` / ``on_stderr`` get each chunk as it comes, on this thread."""
        if self._never_ran is not None:
            return self._never_ran
        client = self.sandbox.client
        o = L.AttachOpts()
        o.command_id = _enc(self.command_id)
        o.follow = 1 if follow else 0
        o.stdout_offset, o.stderr_offset = int(stdout_offset), int(stderr_offset)
        o.wait_ms = _ms(timeout, "timeout") if follow else 0
        col = None
        if on_stdout is not None or on_stderr is not None:

            def user(stream: str, data: bytes) -> None:
                fn = on_stdout if stream == "stdout" else on_stderr
                if fn is not None:
                    fn(data)

            col = _Collector(user, L.SBX_MAX_OUTPUT_BYTES)
            o.on_output = col.c_callback
        ret = POINTER(L.Result)()
        with client._locked() as c:
            code = client._lib.sbx_attach(c, self.sandbox._bid, byref(o), byref(ret))
            try:
                result = _result_from_c(ret.contents, col) if ret else None
            finally:
                client._lib.sbx_result_free(ret)
            if code != Code.OK:
                timed_out = code == Code.UNAVAILABLE and client._lib.sbx_errno(c) == errno.ETIMEDOUT
                if not (timed_out and col is not None):
                    client._raise(code, result)
        if result is None:  # the wait ran out while chunks went to the callbacks
            return self.attach(follow=False)
        if col is not None and col.error is not None:
            raise col.error
        return result

    def output(self) -> Result:
        """What it kept so far and where it stands (``Outcome.RUNNING`` while it runs)."""
        return self.attach(follow=False)

    def wait(
        self,
        timeout: Optional[float] = None,
        *,
        on_stdout: Optional[Callable[[bytes], None]] = None,
        on_stderr: Optional[Callable[[bytes], None]] = None,
    ) -> Result:
        """Follows it to its end (at most ``timeout`` seconds) and returns its result,
        with the output it kept."""
        return self.attach(follow=True, timeout=timeout, on_stdout=on_stdout, on_stderr=on_stderr)

    def send_stdin(self, data: Union[str, bytes], *, eof: bool = False) -> None:
        """Writes data to its stdin (started with ``stdin_open=True``); ``eof`` then
        closes it."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        buf = ctypes.create_string_buffer(bytes(data), len(data) or 1)
        self.sandbox.client._status_call(
            self.sandbox.client._lib.sbx_send_input,
            self.sandbox._bid,
            _enc(self.command_id),
            ctypes.cast(buf, c_void_p),
            len(data),
            1 if eof else 0,
        )

    def close_stdin(self) -> None:
        """Closes its stdin (end of file)."""
        self.send_stdin(b"", eof=True)

    def kill(self) -> None:
        """Kills it (its result says ``cancelled``)."""
        self.sandbox.cancel(self.command_id)

    def signal(self, signo: int) -> None:
        """Sends it a signal, as :meth:`Sandbox.signal`."""
        self.sandbox.signal(self.command_id, signo)
