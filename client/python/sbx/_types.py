"""The plain data of the sbx API: enums, the policy, and the typed results.

Nothing here talks to the daemon. The names follow the agent-sandbox result and policy
shapes agents already use (``SandboxPolicy``, ``SandboxResult``, ``ResourceReport``,
``ResourceLimits``, ``NetworkMode``) where libsbx carries the same information; units
are in the names (``_ms``, ``_bytes``) or, for durations given to the API, seconds as
``float`` like :mod:`subprocess`.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

__all__ = [
    "Code",
    "State",
    "Outcome",
    "NetworkMode",
    "FileType",
    "FileEventKind",
    "FileEvent",
    "ResourceLimits",
    "SandboxPolicy",
    "ResourceReport",
    "Result",
    "SandboxInfo",
    "SandboxList",
    "FileInfo",
    "DirectoryListing",
    "ReadChunk",
    "CommandRecord",
    "History",
    "Hello",
]

PathArg = Union[str, "os.PathLike[str]"]


class Code(enum.IntEnum):
    """The status codes of the sbx.v1 protocol (``enum sbx_code``)."""

    OK = 0
    INVALID_ARGUMENT = 1
    NOT_FOUND = 2
    ALREADY_EXISTS = 3
    PERMISSION_DENIED = 4
    RESOURCE_EXHAUSTED = 5
    FAILED_PRECONDITION = 6
    READ_ONLY = 7
    TOO_LARGE = 8
    UNAVAILABLE = 9
    UNIMPLEMENTED = 10
    INTERNAL = 11
    SANDBOX_ENDED = 12

    def __str__(self) -> str:
        return self.name


class _Named(enum.IntEnum):
    """An enum printed by its lowercase name, as the daemon and ``sbx`` print it.

    Members are looked up by value, never by position. Their names are libsbx's
    (``sbx_state_name``, ``sbx_outcome_name``: the one table of each, in
    libsbx_types.c); ``_lib`` checks every member against them when it loads libsbx.
    """

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def _missing_(cls, value: object) -> "_Named":
        return cls(0)  # a value newer than this binding: "unspecified" / "unknown"


class State(_Named):
    """The life state of a sandbox (``enum sbx_state``)."""

    UNSPECIFIED = 0
    CREATING = 1
    READY = 2
    TERMINATING = 3
    TERMINATED = 4
    EXPIRED = 5
    FAILED = 6
    LOST = 7

    @property
    def ended(self) -> bool:
        """True for the states a sandbox never leaves (terminated, expired, failed, lost)."""
        return self in (State.TERMINATED, State.EXPIRED, State.FAILED, State.LOST)


class Outcome(_Named):
    """How a command ended (``enum sbx_outcome``)."""

    UNSPECIFIED = 0
    EXITED = 1
    SIGNALED = 2
    TIMED_OUT = 3
    OUT_OF_MEMORY = 4
    CANCELLED = 5
    SANDBOX_ENDED = 6
    START_FAILED = 7
    UNKNOWN = 8
    #: In :meth:`Sandbox.history`, and in what a background command's :meth:`Command.output`
    #: says before its end: the command has not ended yet.
    RUNNING = 9
    #: It waited for a slot longer than its ``queue_timeout`` and never ran
    #: (``queued_ms`` says how long).
    QUEUE_TIMEOUT = 10


class CommandState(_Named):
    """Where a command of :attr:`SandboxInfo.commands` stands (``enum sbx_command_state``)."""

    UNSPECIFIED = 0
    QUEUED = 1
    RUNNING = 2
    #: A background command that ended (``outcome`` says how); it can still be attached.
    ENDED = 3


class NetworkMode(_Named):
    """Whether sandboxed processes can reach the network (``enum sbx_network``)."""

    NONE = 0
    FULL = 1
    #: Only through the daemon's filtering proxy, to ``allowed_hosts`` and
    #: ``allowed_cidrs``; every connection is recorded (:meth:`Sandbox.connections`).
    ALLOWLIST = 2


class FileType(_Named):
    """The type of a file in a sandbox (``enum sbx_file_type``)."""

    UNKNOWN = 0
    REGULAR = 1
    DIRECTORY = 2
    SYMLINK = 3
    FIFO = 4
    SOCKET = 5
    CHAR_DEVICE = 6
    BLOCK_DEVICE = 7


class FileEventKind(_Named):
    """What happened to a path under a watch (``enum sbx_file_event_kind``), or
    ``OVERFLOW``, the binding's own: changes were lost (``FileEvent.reason`` says why),
    list the directory again."""

    UNKNOWN = 0
    CREATED = 1
    MODIFIED = 2
    DELETED = 3
    RENAMED = 4
    OVERFLOW = -1


def _path(p: PathArg) -> str:
    return os.path.expanduser(os.fspath(p))


def _paths(ps: Iterable[PathArg]) -> Tuple[str, ...]:
    if isinstance(ps, (str, bytes, os.PathLike)):
        raise TypeError("give a sequence of paths, not one path")
    return tuple(_path(p) for p in ps)


# ---- policy ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceLimits:
    """What the processes of a sandbox may use; ``None`` leaves a limit unset (the
    machine's own, or the daemon's default for processes and tmp).

    Attributes:
        memory_bytes: memory of the whole sandbox.
        cpu_seconds: processor time of each command.
        cpu_percent: processor share (100 = one CPU).
        processes: processes and threads of the sandbox.
        file_size_bytes: the largest file a process may write.
        open_files: open files per process.
        core_dumps: whether a crash may write a core file.
        tmp_bytes: size of the sandbox's private /tmp.
        commands: commands running at once; more wait for a slot (``run``'s
            ``queue_timeout``). Default and maximum: sbxd ``--max-commands``.
        queued_commands: commands waiting for a slot at once; past it ``run`` raises
            :class:`ResourceExhausted`. Default and maximum: sbxd ``--max-queued``.
        disk_bytes: size of /workspace; past it a write there fails with ENOSPC
            inside and ``write_file`` raises :class:`ResourceExhausted` (``limits_hit``
            names "disk"). Default: sbxd ``--default-disk``; ``enforcement["disk"]``
            says what holds it.
        disk_inodes: files and directories in /workspace at once (needs
            ``disk_bytes``). Default: sbxd ``--default-disk-inodes``.
    """

    memory_bytes: Optional[int] = None
    cpu_seconds: Optional[float] = None
    cpu_percent: Optional[int] = None
    processes: Optional[int] = None
    file_size_bytes: Optional[int] = None
    open_files: Optional[int] = None
    core_dumps: Optional[bool] = None
    tmp_bytes: Optional[int] = None
    commands: Optional[int] = None
    queued_commands: Optional[int] = None
    disk_bytes: Optional[int] = None
    disk_inodes: Optional[int] = None


@dataclass(frozen=True)
class SandboxPolicy:
    """The boundary a sandbox's processes run inside (``struct sbx_policy``).

    Reads are open by default and ``denied_read_paths`` hides what must stay secret;
    writes are closed but for the sandbox's own /workspace and /tmp and the
    ``writable_paths`` (host directories, writable at the same paths); the network is
    closed unless ``network`` is :attr:`NetworkMode.FULL`; ``protect_defaults`` keeps
    shell and git configuration, .git/hooks and credential files protected even inside
    writable paths. Paths must be absolute (``~`` is expanded).

    Attributes:
        writable_paths: host paths the sandbox may write.
        denied_write_paths: paths that stay read-only even inside a writable path.
        denied_read_paths: paths the sandbox cannot see.
        network: :attr:`NetworkMode.NONE` (default) or :attr:`NetworkMode.FULL`.
        protect_defaults: keep the usual secrets and configuration protected.
        inherit_environment: names of the daemon-side environment variables a command
            gets; ``None`` leaves the daemon's default list.
        limits: :class:`ResourceLimits`.
        root_dir: a directory to use as the sandbox's ``/`` (``None``: the host's).
        allowed_hosts: with :attr:`NetworkMode.ALLOWLIST`, the names the proxy connects
            to: ``"pypi.org"``, ``"*.npmjs.org"`` (names below it), either with
            ``":PORT"`` (default 80 and 443).
        allowed_cidrs: with :attr:`NetworkMode.ALLOWLIST`, address ranges it may
            connect to by address (``"203.0.113.0/24"``), which also lift the refusal
            of private addresses a name resolves to.
    """

    writable_paths: Tuple[str, ...] = ()
    denied_write_paths: Tuple[str, ...] = ()
    denied_read_paths: Tuple[str, ...] = ()
    network: NetworkMode = NetworkMode.NONE
    protect_defaults: bool = True
    inherit_environment: Optional[Tuple[str, ...]] = None
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    root_dir: Optional[str] = None
    allowed_hosts: Tuple[str, ...] = ()
    allowed_cidrs: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "allowed_hosts", tuple(self.allowed_hosts))
        set_(self, "allowed_cidrs", tuple(self.allowed_cidrs))
        set_(self, "writable_paths", _paths(self.writable_paths))
        set_(self, "denied_write_paths", _paths(self.denied_write_paths))
        set_(self, "denied_read_paths", _paths(self.denied_read_paths))
        set_(self, "network", NetworkMode(self.network))
        if self.inherit_environment is not None:
            set_(self, "inherit_environment", tuple(self.inherit_environment))
        if self.limits is None:
            set_(self, "limits", ResourceLimits())
        if self.root_dir is not None:
            set_(self, "root_dir", _path(self.root_dir))

    @classmethod
    def read_only(
        cls, *, network: NetworkMode = NetworkMode.NONE, limits: Optional[ResourceLimits] = None
    ) -> "SandboxPolicy":
        """A policy that reads the machine and writes nothing but the sandbox's own
        /workspace and /tmp."""
        return cls(network=network, limits=limits or ResourceLimits())

    @classmethod
    def workspace_write(
        cls,
        *roots: PathArg,
        network: NetworkMode = NetworkMode.NONE,
        protect_defaults: bool = True,
        limits: Optional[ResourceLimits] = None,
    ) -> "SandboxPolicy":
        """A policy that may also write the host directories ``roots`` (at the same
        paths), and use the network only if asked."""
        return cls(
            writable_paths=_paths(roots),
            network=network,
            protect_defaults=protect_defaults,
            limits=limits or ResourceLimits(),
        )


# ---- results --------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceReport:
    """How each limit was enforced for a command, and what it used.

    The per-limit attributes (``memory`` ... ``tmp``) name the mechanism that enforced
    the limit: ``"cgroup_v2"``, ``"cgroup_v1"``, ``"rlimit"``, or ``"none"`` (not
    enforced, or not set). ``enforcement`` has them all as libsbx reports them.

    Attributes:
        peak_memory_bytes: the most memory the command used (``None``: unknown).
        peak_memory_source: where that figure comes from (``"cgroup_v2"``, ``"rusage"``).
        cpu_seconds_used: processor time the command used.
        limits_hit: the limits the command ran into (``"memory"``, ``"file_size"``...).
    """

    memory: str = "none"
    cpu_seconds: str = "none"
    cpu_percent: str = "none"
    processes: str = "none"
    file_size_bytes: str = "none"
    open_files: str = "none"
    core_dumps: str = "none"
    tmp: str = "none"
    peak_memory_bytes: Optional[int] = None
    peak_memory_source: Optional[str] = None
    cpu_seconds_used: float = 0.0
    limits_hit: Tuple[str, ...] = ()
    enforcement: Mapping[str, str] = field(default_factory=dict)

    # Limit names of the daemon -> attribute names here.
    _ATTRS = {"file_size": "file_size_bytes"}

    @classmethod
    def _from(cls, enforcement: Mapping[str, str], **kw: object) -> "ResourceReport":
        per_limit = {}
        for limit, how in enforcement.items():
            attr = cls._ATTRS.get(limit, limit)
            if attr in cls.__dataclass_fields__ and attr not in (
                "enforcement",
                "limits_hit",
                "peak_memory_bytes",
                "peak_memory_source",
                "cpu_seconds_used",
            ):
                per_limit[attr] = how
        return cls(enforcement=dict(enforcement), **per_limit, **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Result:
    """What one command in a sandbox produced (``struct sbx_result``).

    Attributes:
        exit_code: the exit status; for a command ended by a signal (a timeout too),
            minus the signal number, as in :attr:`subprocess.Popen.returncode`; ``None``
            when it never started or its end is unknown.
        stdout: standard output decoded as UTF-8, undecodable bytes replaced (U+FFFD).
        stderr: standard error, decoded the same way.
        stdout_bytes: standard output as the raw bytes (the kept tail when truncated).
        stderr_bytes: standard error as the raw bytes.
        timed_out: the command ran past its timeout and was killed.
        stdout_truncated: stdout exceeded ``max_output_bytes``; the tail is kept.
        stderr_truncated: stderr exceeded ``max_output_bytes``; the tail is kept.
        stdout_total_bytes: how many bytes the command wrote to stdout in all.
        stderr_total_bytes: the same for stderr.
        duration: wall-clock seconds the command took.
        sandbox: the ID of the sandbox that ran it.
        command_id: the command's ID in that sandbox (``c-N``).
        isolated: whether the sandbox enforces a boundary at all.
        warnings: parts of the policy this host could not enforce.
        resources: :class:`ResourceReport`.
        outcome: :class:`Outcome`, how it ended.
        signal: the signal that ended it, or ``None``.
        start_error: why it never started (``outcome`` START_FAILED), else ``None``.
        start_errno: the errno of that failure (0 otherwise).
        owner_uid: the uid of the sandbox's owner (``None`` from an older daemon); not
            yours in a sandbox shared with you, whose owner sees everything run there.
        queued_ms: milliseconds it waited for a slot before it started (or until it
            ended, when it never started); 0 when it did not wait.
        timeout: the command's own timeout in seconds, as it ran; ``None`` for none (a
            background command without one) or from a daemon that does not say.
    """

    exit_code: Optional[int]
    stdout: str
    stderr: str
    stdout_bytes: bytes = field(default=b"", repr=False)
    stderr_bytes: bytes = field(default=b"", repr=False)
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_total_bytes: int = 0
    stderr_total_bytes: int = 0
    duration: float = 0.0
    sandbox: str = ""
    command_id: str = ""
    isolated: bool = False
    warnings: Tuple[str, ...] = ()
    resources: ResourceReport = field(default_factory=ResourceReport)
    outcome: Outcome = Outcome.UNSPECIFIED
    signal: Optional[int] = None
    start_error: Optional[str] = None
    start_errno: int = 0
    owner_uid: Optional[int] = None
    queued_ms: int = 0
    timeout: Optional[float] = None

    @property
    def succeeded(self) -> bool:
        """Whether the command exited with status 0 within its time limit."""
        return self.outcome == Outcome.EXITED and self.exit_code == 0 and not self.timed_out

    @property
    def limits_hit(self) -> Tuple[str, ...]:
        """Shorthand for ``resources.limits_hit``."""
        return self.resources.limits_hit

    def check(self) -> "Result":
        """Returns self when the command succeeded; raises otherwise: :class:`Timeout`
        when it timed out, :class:`SandboxEnded` when the sandbox ended under it,
        :class:`CommandFailed` for any other end (non-zero exit, signal, start failure).
        The exception's ``result`` is this result, and its ``code`` the outcome
        (``Outcome.TIMED_OUT``, ``Outcome.EXITED``, ...; ``Code.SANDBOX_ENDED`` for
        :class:`SandboxEnded`)."""
        from ._errors import CommandFailed, SandboxEnded, Timeout

        if self.succeeded:
            return self
        if self.timed_out or self.outcome == Outcome.TIMED_OUT:
            raise Timeout(f"command {self.command_id} timed out after {self.duration:.3f} s",
                          result=self, code=Outcome.TIMED_OUT)
        if self.outcome == Outcome.SANDBOX_ENDED:
            raise SandboxEnded(f"sandbox '{self.sandbox}' ended while command {self.command_id} ran", result=self)
        if self.outcome == Outcome.START_FAILED:
            why = f"did not start: {self.start_error}"
        elif self.outcome == Outcome.QUEUE_TIMEOUT:
            why = f"never ran: no slot in sandbox '{self.sandbox}' within {self.queued_ms / 1000:.3g} s"
        elif self.outcome == Outcome.EXITED:
            why = f"exited with status {self.exit_code}"
        elif self.signal is not None:
            why = f"{self.outcome} (signal {self.signal})"
        else:
            why = str(self.outcome)
        tail = self.stderr.strip().splitlines()[-1:] if self.stderr.strip() else []
        msg = f"command {self.command_id} {why}" + (f": {tail[0]}" if tail else "")
        raise CommandFailed(msg, result=self)


# ---- sandboxes ------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandInfo:
    """A command of a live sandbox (``struct sbx_command_info``): running or waiting
    for a slot, or a background command that ended and can still be attached to (the
    last 16 per sandbox). ``outcome`` and ``exit_code`` are set once it ended."""

    command_id: str
    argv: Tuple[str, ...]
    state: CommandState
    background: bool
    caller_uid: int
    started_unix_ms: int
    ended_unix_ms: int
    outcome: Optional[Outcome]
    exit_code: Optional[int]
    #: It runs (ran) on a terminal (``run(tty=True)``).
    tty: bool = False


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as the daemon describes it (``struct sbx_sandbox``).

    Times are Unix milliseconds (0: not set); ``end_reason`` is ``None`` while it is
    live; ``enforcement`` maps each limit to its mechanism; ``warnings`` lists what this
    host could not enforce of the policy.
    """

    id: str
    state: State
    owner_uid: int
    labels: Mapping[str, str]
    created_unix_ms: int
    deadline_unix_ms: int
    idle_timeout_ms: int
    ended_unix_ms: int
    end_reason: Optional[str]
    policy: SandboxPolicy
    isolated: bool
    warnings: Tuple[str, ...]
    enforcement: Mapping[str, str]
    running_commands: int
    commands_run: int
    share_uids: Tuple[int, ...]
    share_gids: Tuple[int, ...]
    #: Commands waiting for a slot (the sandbox runs ``policy.limits.commands``).
    queued_commands: int = 0
    #: Its commands running or waiting, and its ended background commands still kept,
    #: oldest first (live sandboxes only).
    commands: Tuple[CommandInfo, ...] = ()
    #: The image it was made from, as given (``None``: the host's root), and the
    #: manifest digest that named (live sandboxes).
    image: Optional[str] = None
    image_digest: Optional[str] = None

    @property
    def ended(self) -> bool:
        """True once the sandbox has ended (it cannot run anything any more)."""
        return self.state.ended

    #: What a :class:`Sandbox` does and a description cannot: asked of a SandboxInfo,
    #: each says how to get the Sandbox.
    _SANDBOX_VERBS = frozenset(
        ("run", "read_file", "read_text", "read_chunk", "write_file", "list_directory",
         "stat", "exists", "mkdir", "remove", "set_timeout", "terminate", "history",
         "connections", "cancel", "signal", "resize", "command"))

    def __getattr__(self, name: str) -> Any:
        # Only for names a dataclass field or method did not answer.
        if name in SandboxInfo._SANDBOX_VERBS:
            raise AttributeError(
                f"a SandboxInfo is a description of sandbox '{self.id}' (what Client.get() "
                f"and Client.list() return) and has no {name}(); Client.attach('{self.id}') "
                f"gives a Sandbox to work in it, from any process that may use it")
        raise AttributeError(f"'SandboxInfo' object has no attribute '{name}'")


class SandboxList(list[SandboxInfo]):
    """A list of :class:`SandboxInfo`; ``truncated`` says the daemon cut it at a limit."""

    truncated: bool = False


# ---- files ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FileInfo:
    """A file in a sandbox (``struct sbx_file_info``); ``mode`` holds the permission
    bits. :meth:`Sandbox.stat` follows a symbolic link (type and size are its
    target's) and names the target in ``symlink_target``; :meth:`Sandbox.list_directory`
    describes a link itself (type ``SYMLINK``). ``symlink_target`` is ``None`` for
    anything else."""

    name: str
    type: FileType
    size: int
    mode: int
    mtime_unix_ms: int
    is_dir: bool
    symlink_target: Optional[str] = None


@dataclass(frozen=True)
class FileEvent:
    """One change under a watch (:meth:`Sandbox.watch`), its paths as the sandbox sees
    them; ``old_path`` is where a RENAMED one was. An ``OVERFLOW`` event has no path
    and a ``reason``."""

    kind: FileEventKind
    path: str
    old_path: Optional[str] = None
    is_dir: bool = False
    reason: Optional[str] = None


class DirectoryListing(list[FileInfo]):
    """The entries of a directory, sorted by name; ``truncated`` says it was cut at the
    limit."""

    truncated: bool = False


@dataclass(frozen=True)
class ReadChunk:
    """One page of a file: ``data`` from the offset asked for, the file's ``size``,
    where the next page starts, and whether this one reached the end."""

    data: bytes
    size: int
    next_offset: int
    eof: bool


# ---- history and hello ----------------------------------------------------------------


@dataclass(frozen=True)
class CommandRecord:
    """One command of a sandbox's history (``struct sbx_command_record``);
    ``ended_unix_ms`` is 0 while it runs; ``queued_ms`` is how long it waited for a
    slot."""

    seq: int
    command_id: str
    argv: Tuple[str, ...]
    cwd: str
    caller_uid: int
    caller_pid: int
    client_name: str
    started_unix_ms: int
    ended_unix_ms: int
    outcome: Outcome
    exit_code: Optional[int]
    signal: Optional[int]
    duration: float
    peak_memory_bytes: int
    stdout_total_bytes: int
    stderr_total_bytes: int
    stdout_truncated: bool
    stderr_truncated: bool
    queued_ms: int = 0
    #: Started with ``run(..., background=True)``.
    background: bool = False
    #: It ran on a terminal (``run(tty=True)``).
    tty: bool = False

    @property
    def running(self) -> bool:
        return self.ended_unix_ms == 0


@dataclass(frozen=True)
class ConnectionRecord:
    """One connection an allowlist sandbox's proxy allowed or refused
    (``struct sbx_connection_record``); ``ended_unix_ms`` is 0 while it is open."""

    seq: int
    started_unix_ms: int
    ended_unix_ms: int
    host: Optional[str]
    port: int
    address: Optional[str]
    allowed: bool
    reason: Optional[str]
    method: Optional[str]
    bytes_sent: int
    bytes_received: int


class Connections(list[ConnectionRecord]):
    """Connections oldest first; page on with ``after_seq=next_after_seq`` while
    ``truncated``."""

    next_after_seq: int = 0
    truncated: bool = False


@dataclass(frozen=True)
class ForwardRecord:
    """One stream opened to a sandbox's port (``struct sbx_forward_record``):
    ``closed_unix_ms`` is 0 while it is open; ``bytes_in`` went to the port,
    ``bytes_out`` came from it."""

    seq: int
    caller_uid: int
    caller_pid: int
    client_name: Optional[str]
    port: int
    address: Optional[str]
    opened_unix_ms: int
    closed_unix_ms: int
    bytes_in: int
    bytes_out: int
    reason: Optional[str]


class Forwards(list[ForwardRecord]):
    """Streams oldest first; page on with ``after_seq=next_after_seq`` while
    ``truncated``."""

    next_after_seq: int = 0
    truncated: bool = False


class History(list[CommandRecord]):
    """Commands oldest first; page on with ``after_seq=next_after_seq`` while
    ``truncated``."""

    next_after_seq: int = 0
    truncated: bool = False


@dataclass(frozen=True)
class Hello:
    """What the daemon said at connect time (``struct sbx_hello``)."""

    protocol_version: int
    daemon_version: str
    cgroup_version: str
    user_namespaces: bool
    rootless: bool
    seccomp: bool
    landlock_abi: int
    openat2: bool
    max_frame_bytes: int
    peer_uid: int
    implemented: Tuple[str, ...]
    #: A root daemon's sandbox uids: ``sandbox_uid_first`` to ``sandbox_uid_first +
    #: sandbox_uid_count - 1``, reserved host-wide by the file ``uid_reservation``;
    #: ``uid_origin`` is "recorded", "picked" or "flag" (see sbxd(8)). A count of 0 and
    #: None for a rootless daemon.
    sandbox_uid_first: int = 0
    sandbox_uid_count: int = 0
    uid_reservation: Optional[str] = None
    uid_origin: Optional[str] = None


def _env_list(env: Optional[Mapping[str, str]]) -> List[str]:
    if not env:
        return []
    out = []
    for k, v in env.items():
        if not k or "=" in k:
            raise ValueError(f"invalid environment variable name {k!r}")
        out.append(f"{k}={v}")
    return out


def _labels(labels: Optional[Mapping[str, str]]) -> Dict[str, str]:
    return dict(labels or {})
