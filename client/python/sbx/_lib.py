"""ctypes mirror of libsbx (client/sbx.h): library loading, structs, prototypes.

This module owns the one handle on libsbx.so that the package uses. It is loaded on
first use (not at import, so ``import sbx`` and ``help(sbx)`` work without the
library) by :func:`lib`, which also runs a layout self-check and raises
:class:`LibraryError` when the library cannot be found or does not match.

Layout assumption: every ``Structure`` below repeats a struct of sbx.h field by field,
in order, with the same C types (``enum`` as ``int``, ``size_t`` as ``c_size_t``,
``unsigned`` as ``c_uint``). libsbx has no getter for its struct sizes, so the
self-check verifies what it can at run time: the input structs that libsbx fills
with an ``*_init`` function (``sbx_policy``, ``sbx_create_opts``, ``sbx_exec_opts``)
are cleared by ``memset(p, 0, sizeof(*p))``, so initialising one inside a larger
sentinel-filled buffer shows libsbx's ``sizeof`` exactly, and the fields that the init
functions set show their offsets; the enum names are compared through
``sbx_code_name``, ``sbx_state_name``, ``sbx_outcome_name`` and
``sbx_file_event_kind_name``. The result structs
(only ever read from pointers libsbx returns) are checked by the test suite, which
compiles a C program against sbx.h and compares every ``sizeof`` and ``offsetof``
with this module (tests/python/test_sbx.py, LayoutTest). Change both together.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any, Callable, List, Optional

__all__ = ["LibraryError", "lib", "library_path"]


class LibraryError(OSError):
    """libsbx.so could not be loaded, or it does not match this binding."""


# ---- structs (client/sbx.h, in its order) ---------------------------------------------


class Hello(Structure):
    _fields_ = [
        ("protocol_version", c_uint32),
        ("daemon_version", c_char_p),
        ("cgroup_version", c_char_p),
        ("user_namespaces", c_int),
        ("rootless", c_int),
        ("seccomp", c_int),
        ("landlock_abi", c_uint32),
        ("openat2", c_int),
        ("max_frame_bytes", c_uint64),
        ("peer_uid", c_uint32),
        ("implemented", POINTER(c_char_p)),
        ("n_implemented", c_size_t),
        ("sandbox_uid_first", c_uint32),
        ("sandbox_uid_count", c_uint32),
        ("uid_reservation", c_char_p),
        ("uid_origin", c_char_p),
    ]


class Limits(Structure):
    _fields_ = [
        ("set", c_uint),
        ("memory_bytes", c_uint64),
        ("cpu_seconds", c_double),
        ("cpu_percent", c_uint32),
        ("processes", c_uint32),
        ("file_size_bytes", c_uint64),
        ("open_files", c_uint32),
        ("core_dumps", c_int),
        ("tmp_bytes", c_uint64),
        ("commands", c_uint32),
        ("queued_commands", c_uint32),
        ("disk_bytes", c_uint64),
        ("disk_inodes", c_uint64),
    ]


class Strv(Structure):
    _fields_ = [("v", POINTER(c_char_p)), ("n", c_size_t)]


class Policy(Structure):
    _fields_ = [
        ("writable_paths", Strv),
        ("denied_read_paths", Strv),
        ("denied_write_paths", Strv),
        ("network", c_int),
        ("protect_defaults", c_int),
        ("inherit_environment", Strv),
        ("inherit_environment_set", c_int),
        ("limits", Limits),
        ("root_dir", c_char_p),
        ("allowed_hosts", Strv),
        ("allowed_cidrs", Strv),
    ]


class Label(Structure):
    _fields_ = [("key", c_char_p), ("value", c_char_p)]


class CreateOpts(Structure):
    _fields_ = [
        ("id", c_char_p),
        ("policy", Policy),
        ("timeout_ms", c_uint64),
        ("idle_timeout_ms", c_uint64),
        ("labels", POINTER(Label)),
        ("n_labels", c_size_t),
        ("env", POINTER(c_char_p)),
        ("n_env", c_size_t),
        ("share_uids", POINTER(c_uint32)),
        ("n_share_uids", c_size_t),
        ("share_gids", POINTER(c_uint32)),
        ("n_share_gids", c_size_t),
        ("keep_workspace", c_int),
        ("image", c_char_p),
    ]


class Enforcement(Structure):
    _fields_ = [("limit", c_char_p), ("enforcement", c_char_p)]


class CommandInfo(Structure):
    _fields_ = [
        ("command_id", c_char_p),
        ("argv", Strv),
        ("state", c_int),
        ("background", c_int),
        ("caller_uid", c_uint32),
        ("started_unix_ms", c_int64),
        ("ended_unix_ms", c_int64),
        ("outcome", c_int),
        ("has_exit_code", c_int),
        ("exit_code", c_int),
        ("tty", c_int),
    ]


class Sandbox(Structure):
    _fields_ = [
        ("id", c_char_p),
        ("state", c_int),
        ("owner_uid", c_uint32),
        ("labels", POINTER(Label)),
        ("n_labels", c_size_t),
        ("created_unix_ms", c_int64),
        ("deadline_unix_ms", c_int64),
        ("idle_timeout_ms", c_uint64),
        ("ended_unix_ms", c_int64),
        ("end_reason", c_char_p),
        ("policy", Policy),
        ("isolated", c_int),
        ("warnings", Strv),
        ("enforcement", POINTER(Enforcement)),
        ("n_enforcement", c_size_t),
        ("running_commands", c_uint32),
        ("commands_run", c_uint64),
        ("share_uids", POINTER(c_uint32)),
        ("n_share_uids", c_size_t),
        ("share_gids", POINTER(c_uint32)),
        ("n_share_gids", c_size_t),
        ("queued_commands", c_uint32),
        ("commands", POINTER(CommandInfo)),
        ("n_commands", c_size_t),
        ("image", c_char_p),
        ("image_digest", c_char_p),
    ]


class ListOpts(Structure):
    _fields_ = [
        ("labels", POINTER(Label)),
        ("n_labels", c_size_t),
        ("states", POINTER(c_int)),
        ("n_states", c_size_t),
        ("has_owner_uid", c_int),
        ("owner_uid", c_uint32),
        ("include_ended", c_int),
        ("limit", c_uint32),
    ]


class SandboxList(Structure):
    _fields_ = [("v", POINTER(POINTER(Sandbox))), ("n", c_size_t), ("truncated", c_int)]


# void (*)(void *userdata, enum sbx_stream stream, uint64_t offset, const void *data, size_t len)
OutputCallback = CFUNCTYPE(None, c_void_p, c_int, c_uint64, c_void_p, c_size_t)

# void (*)(void *userdata, const char *command_id)
StartedCallback = CFUNCTYPE(None, c_void_p, c_char_p)

# void (*)(void *userdata, const char *command_id, uint32_t ahead)
QueuedCallback = CFUNCTYPE(None, c_void_p, c_char_p, c_uint32)


class ExecOpts(Structure):
    _fields_ = [
        ("argv", POINTER(c_char_p)),
        ("argc", c_size_t),
        ("shell", c_char_p),
        ("cwd", c_char_p),
        ("env", POINTER(c_char_p)),
        ("n_env", c_size_t),
        ("stdin_data", c_void_p),
        ("stdin_len", c_size_t),
        ("timeout_ms", c_uint64),
        ("max_stdout_bytes", c_uint64),
        ("max_stderr_bytes", c_uint64),
        ("on_output", OutputCallback),
        ("userdata", c_void_p),
        ("stdin_stream", c_int),
        ("stdin_fd", c_int),
        ("on_started", StartedCallback),
        ("has_queue_timeout", c_int),
        ("queue_timeout_ms", c_uint64),
        ("on_queued", QueuedCallback),
        ("no_timeout", c_int),
        ("tty", c_int),
        ("rows", c_uint32),
        ("cols", c_uint32),
        ("user", c_char_p),
    ]


class Result(Structure):
    _fields_ = [
        ("command_id", c_char_p),
        ("sandbox_id", c_char_p),
        ("outcome", c_int),
        ("has_exit_code", c_int),
        ("exit_code", c_int),
        ("has_signal", c_int),
        ("signal", c_int),
        ("timed_out", c_int),
        ("stdout_data", POINTER(c_uint8)),
        ("stdout_len", c_size_t),
        ("stderr_data", POINTER(c_uint8)),
        ("stderr_len", c_size_t),
        ("stdout_truncated", c_int),
        ("stderr_truncated", c_int),
        ("stdout_bytes", c_uint64),
        ("stderr_bytes", c_uint64),
        ("duration", c_double),
        ("isolated", c_int),
        ("warnings", Strv),
        ("cpu_seconds", c_double),
        ("peak_memory_bytes", c_uint64),
        ("peak_memory_source", c_char_p),
        ("limits_hit", Strv),
        ("enforcement", POINTER(Enforcement)),
        ("n_enforcement", c_size_t),
        ("start_error", c_char_p),
        ("start_errno", c_int),
        ("has_owner_uid", c_int),
        ("owner_uid", c_uint32),
        ("queued_ms", c_uint64),
        ("has_timeout_ms", c_int),
        ("timeout_ms", c_uint64),
    ]


class Background(Structure):
    _fields_ = [
        ("command_id", c_char_p),
        ("queued", c_int),
        ("ahead", c_uint32),
        ("result", POINTER(Result)),
    ]


class AttachOpts(Structure):
    _fields_ = [
        ("command_id", c_char_p),
        ("follow", c_int),
        ("stdout_offset", c_uint64),
        ("stderr_offset", c_uint64),
        ("on_output", OutputCallback),
        ("userdata", c_void_p),
        ("max_output_bytes", c_uint64),
        ("wait_ms", c_uint64),
    ]


class ReadResult(Structure):
    _fields_ = [
        ("data", POINTER(c_uint8)),
        ("len", c_size_t),
        ("size", c_uint64),
        ("next_offset", c_uint64),
        ("eof", c_int),
    ]


class FileInfo(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("type", c_int),
        ("size", c_uint64),
        ("mode", c_uint32),
        ("mtime_unix_ms", c_int64),
        ("is_dir", c_int),
        ("symlink_target", c_char_p),
    ]


class DirList(Structure):
    _fields_ = [("v", POINTER(FileInfo)), ("n", c_size_t), ("truncated", c_int)]


class CommandRecord(Structure):
    _fields_ = [
        ("seq", c_uint64),
        ("command_id", c_char_p),
        ("argv", Strv),
        ("cwd", c_char_p),
        ("caller_uid", c_uint32),
        ("caller_pid", c_int32),
        ("client_name", c_char_p),
        ("started_unix_ms", c_int64),
        ("ended_unix_ms", c_int64),
        ("outcome", c_int),
        ("has_exit_code", c_int),
        ("exit_code", c_int),
        ("has_signal", c_int),
        ("signal", c_int),
        ("duration", c_double),
        ("peak_memory_bytes", c_uint64),
        ("stdout_bytes", c_uint64),
        ("stderr_bytes", c_uint64),
        ("stdout_truncated", c_int),
        ("stderr_truncated", c_int),
        ("queued_ms", c_uint64),
        ("background", c_int),
        ("tty", c_int),
    ]


class History(Structure):
    _fields_ = [
        ("v", POINTER(CommandRecord)),
        ("n", c_size_t),
        ("next_after_seq", c_uint64),
        ("truncated", c_int),
    ]


class ConnectionRecord(Structure):
    _fields_ = [
        ("seq", c_uint64),
        ("started_unix_ms", c_int64),
        ("ended_unix_ms", c_int64),
        ("host", c_char_p),
        ("port", c_uint32),
        ("address", c_char_p),
        ("allowed", c_int),
        ("reason", c_char_p),
        ("method", c_char_p),
        ("bytes_sent", c_uint64),
        ("bytes_received", c_uint64),
    ]


class Connections(Structure):
    _fields_ = [
        ("v", POINTER(ConnectionRecord)),
        ("n", c_size_t),
        ("next_after_seq", c_uint64),
        ("truncated", c_int),
    ]


class ForwardRecord(Structure):
    _fields_ = [
        ("seq", c_uint64),
        ("caller_uid", c_uint32),
        ("caller_pid", c_int32),
        ("client_name", c_char_p),
        ("port", c_uint32),
        ("address", c_char_p),
        ("opened_unix_ms", c_int64),
        ("closed_unix_ms", c_int64),
        ("bytes_in", c_uint64),
        ("bytes_out", c_uint64),
        ("reason", c_char_p),
    ]


class Forwards(Structure):
    _fields_ = [
        ("v", POINTER(ForwardRecord)),
        ("n", c_size_t),
        ("next_after_seq", c_uint64),
        ("truncated", c_int),
    ]


# Every struct above with its C name, for the layout test.
class ImageConfig(Structure):
    _fields_ = [
        ("env", Strv),
        ("entrypoint", Strv),
        ("cmd", Strv),
        ("working_dir", c_char_p),
        ("user", c_char_p),
        ("os", c_char_p),
        ("architecture", c_char_p),
        ("variant", c_char_p),
        ("labels", POINTER(Label)),
        ("n_labels", c_size_t),
    ]


class Image(Structure):
    _fields_ = [
        ("names", Strv),
        ("digest", c_char_p),
        ("size_bytes", c_uint64),
        ("data_bytes", c_uint64),
        ("sandboxes", c_uint32),
        ("created_unix_ms", c_int64),
        ("last_used_unix_ms", c_int64),
        ("layers", Strv),
        ("config", POINTER(ImageConfig)),
        ("downloaded_bytes", c_uint64),
    ]


class ImageList(Structure):
    _fields_ = [("v", POINTER(Image)), ("n", c_size_t)]


class RemovedImages(Structure):
    _fields_ = [("names", Strv), ("freed_bytes", c_uint64)]


class ImageProgress(Structure):
    _fields_ = [
        ("phase", c_char_p),
        ("digest", c_char_p),
        ("index", c_uint32),
        ("count", c_uint32),
        ("done_bytes", c_uint64),
        ("total_bytes", c_uint64),
        ("reused", c_int),
    ]


class ForkOpts(Structure):
    _fields_ = [
        ("count", c_uint),
        ("snapshot_name", c_char_p),
        ("create", POINTER(CreateOpts)),
    ]


class Fork(Structure):
    _fields_ = [("snapshot", c_char_p), ("ids", POINTER(c_char_p)), ("n", c_size_t)]


ProgressCallback = CFUNCTYPE(None, c_void_p, POINTER(ImageProgress))


class RegistryAuth(Structure):
    _fields_ = [("username", c_char_p), ("password", c_char_p), ("token", c_char_p)]


class PullOpts(Structure):
    _fields_ = [
        ("auth", POINTER(RegistryAuth)),
        ("on_progress", ProgressCallback),
        ("userdata", c_void_p),
    ]


class FileEvent(Structure):
    _fields_ = [
        ("kind", c_int),
        ("path", c_char_p),
        ("old_path", c_char_p),
        ("is_dir", c_int),
    ]


class FileEvents(Structure):
    _fields_ = [
        ("v", POINTER(FileEvent)),
        ("n", c_size_t),
        ("overflow", c_int),
        ("overflow_reason", c_char_p),
    ]


class WatchOpts(Structure):
    _fields_ = [("recursive", c_int), ("coalesce_ms", c_uint32)]


STRUCTS = {
    "sbx_hello": Hello,
    "sbx_limits": Limits,
    "sbx_strv": Strv,
    "sbx_policy": Policy,
    "sbx_label": Label,
    "sbx_create_opts": CreateOpts,
    "sbx_enforcement": Enforcement,
    "sbx_sandbox": Sandbox,
    "sbx_list_opts": ListOpts,
    "sbx_sandbox_list": SandboxList,
    "sbx_exec_opts": ExecOpts,
    "sbx_result": Result,
    "sbx_read_result": ReadResult,
    "sbx_file_info": FileInfo,
    "sbx_dir_list": DirList,
    "sbx_command_record": CommandRecord,
    "sbx_history": History,
    "sbx_connection_record": ConnectionRecord,
    "sbx_connections": Connections,
    "sbx_forward_record": ForwardRecord,
    "sbx_forwards": Forwards,
    "sbx_command_info": CommandInfo,
    "sbx_background": Background,
    "sbx_attach_opts": AttachOpts,
    "sbx_image_config": ImageConfig,
    "sbx_image": Image,
    "sbx_image_list": ImageList,
    "sbx_removed_images": RemovedImages,
    "sbx_image_progress": ImageProgress,
    "sbx_fork_opts": ForkOpts,
    "sbx_fork": Fork,
    "sbx_registry_auth": RegistryAuth,
    "sbx_pull_opts": PullOpts,
    "sbx_file_event": FileEvent,
    "sbx_file_events": FileEvents,
    "sbx_watch_opts": WatchOpts,
}

# ---- constants (client/sbx.h) ---------------------------------------------------------

LIMIT_MEMORY = 1 << 0
LIMIT_CPU_SECONDS = 1 << 1
LIMIT_CPU_PERCENT = 1 << 2
LIMIT_PROCESSES = 1 << 3
LIMIT_FILE_SIZE = 1 << 4
LIMIT_OPEN_FILES = 1 << 5
LIMIT_CORE_DUMPS = 1 << 6
LIMIT_TMP = 1 << 7
LIMIT_COMMANDS = 1 << 8
LIMIT_QUEUED_COMMANDS = 1 << 9
LIMIT_DISK = 1 << 10
LIMIT_DISK_INODES = 1 << 11

# Each limit: its field (of struct sbx_limits, of Limits above and of ResourceLimits), its
# bit of sbx_limits.set and its Python type, in the order of the one table of limits,
# SBX_LIMIT_TABLE in client/libsbx_limit_table.h (tests/python/test_sbx.py compares the
# two, so a limit added there and not here fails the suite).
LIMITS = [
    ("memory_bytes", LIMIT_MEMORY, int),
    ("cpu_seconds", LIMIT_CPU_SECONDS, float),
    ("cpu_percent", LIMIT_CPU_PERCENT, int),
    ("processes", LIMIT_PROCESSES, int),
    ("file_size_bytes", LIMIT_FILE_SIZE, int),
    ("open_files", LIMIT_OPEN_FILES, int),
    ("core_dumps", LIMIT_CORE_DUMPS, bool),
    ("tmp_bytes", LIMIT_TMP, int),
    ("commands", LIMIT_COMMANDS, int),
    ("queued_commands", LIMIT_QUEUED_COMMANDS, int),
    ("disk_bytes", LIMIT_DISK, int),
    ("disk_inodes", LIMIT_DISK_INODES, int),
]

IDLE_TIMEOUT_NONE = (1 << 64) - 1  # SBX_IDLE_TIMEOUT_NONE: no idle timeout

WRITE_CREATE_PARENTS = 1 << 0
WRITE_APPEND = 1 << 1

STDOUT = 1
STDERR = 2

SBX_MAX_OUTPUT_BYTES = 64 << 20  # the largest cap per stream (sbx_limits.h)

# ---- prototypes -----------------------------------------------------------------------

_client_p = c_void_p  # sbx_client *, opaque


def _pp(t: Any) -> Any:
    return POINTER(POINTER(t))


_PROTOTYPES = {
    "sbx_code_name": (c_char_p, [c_int]),
    "sbx_state_name": (c_char_p, [c_int]),
    "sbx_outcome_name": (c_char_p, [c_int]),
    "sbx_default_socket_path": (c_int, [c_char_p, c_size_t]),
    "sbx_connect": (c_int, [c_char_p, c_char_p, POINTER(_client_p)]),
    "sbx_close": (None, [_client_p]),
    "sbx_set_call_timeout_ms": (None, [_client_p, c_uint64]),
    "sbx_error_message": (c_char_p, [_client_p]),
    "sbx_errno": (c_int, [_client_p]),
    "sbx_hello": (c_int, [_client_p, _pp(Hello)]),
    "sbx_hello_free": (None, [POINTER(Hello)]),
    "sbx_policy_init": (None, [c_void_p]),
    "sbx_policy_read_only": (None, [c_void_p, c_int]),
    "sbx_policy_workspace_write": (None, [c_void_p, POINTER(c_char_p), c_size_t, c_int]),
    "sbx_create_opts_init": (None, [c_void_p]),
    "sbx_create": (c_int, [_client_p, POINTER(CreateOpts), _pp(Sandbox)]),
    "sbx_get": (c_int, [_client_p, c_char_p, _pp(Sandbox)]),
    "sbx_terminate": (c_int, [_client_p, c_char_p, _pp(Sandbox)]),
    "sbx_set_timeout": (c_int, [_client_p, c_char_p, c_uint64, _pp(Sandbox)]),
    "sbx_restore": (c_int, [_client_p, c_char_p, c_char_p, _pp(Sandbox)]),
    "sbx_sandbox_free": (None, [POINTER(Sandbox)]),
    "sbx_list": (c_int, [_client_p, POINTER(ListOpts), _pp(SandboxList)]),
    "sbx_sandbox_list_free": (None, [POINTER(SandboxList)]),
    "sbx_exec_opts_init": (None, [c_void_p]),
    "sbx_exec": (c_int, [_client_p, c_char_p, POINTER(ExecOpts), _pp(Result)]),
    "sbx_result_free": (None, [POINTER(Result)]),
    "sbx_cancel": (c_int, [_client_p, c_char_p, c_char_p]),
    "sbx_signal": (c_int, [_client_p, c_char_p, c_char_p, c_int]),
    "sbx_exec_background": (c_int, [_client_p, c_char_p, POINTER(ExecOpts), _pp(Background)]),
    "sbx_background_free": (None, [POINTER(Background)]),
    "sbx_attach": (c_int, [_client_p, c_char_p, POINTER(AttachOpts), _pp(Result)]),
    "sbx_send_input": (c_int, [_client_p, c_char_p, c_char_p, c_void_p, c_size_t, c_int]),
    "sbx_resize": (c_int, [_client_p, c_char_p, c_char_p, c_uint32, c_uint32]),
    "sbx_read": (c_int, [_client_p, c_char_p, c_char_p, c_uint64, c_uint64, _pp(ReadResult)]),
    "sbx_read_result_free": (None, [POINTER(ReadResult)]),
    "sbx_write": (c_int, [_client_p, c_char_p, c_char_p, c_void_p, c_size_t, c_uint32, c_uint]),
    "sbx_list_dir": (c_int, [_client_p, c_char_p, c_char_p, c_uint32, _pp(DirList)]),
    "sbx_dir_list_free": (None, [POINTER(DirList)]),
    "sbx_stat": (c_int, [_client_p, c_char_p, c_char_p, _pp(FileInfo)]),
    "sbx_file_info_free": (None, [POINTER(FileInfo)]),
    "sbx_mkdir": (c_int, [_client_p, c_char_p, c_char_p, c_uint32, c_int]),
    "sbx_remove": (c_int, [_client_p, c_char_p, c_char_p, c_int]),
    "sbx_history": (c_int, [_client_p, c_char_p, c_uint64, c_uint32, _pp(History)]),
    "sbx_history_free": (None, [POINTER(History)]),
    "sbx_connections": (c_int, [_client_p, c_char_p, c_uint64, c_uint32, _pp(Connections)]),
    "sbx_connections_free": (None, [POINTER(Connections)]),
    "sbx_forwards": (c_int, [_client_p, c_char_p, c_uint64, c_uint32, _pp(Forwards)]),
    "sbx_forwards_free": (None, [POINTER(Forwards)]),
    "sbx_image_pull": (c_int, [_client_p, c_char_p, POINTER(PullOpts), _pp(Image)]),
    "sbx_image_list": (c_int, [_client_p, _pp(ImageList)]),
    "sbx_image_inspect": (c_int, [_client_p, c_char_p, _pp(Image)]),
    "sbx_image_remove": (c_int, [_client_p, c_char_p, _pp(RemovedImages)]),
    "sbx_image_prune": (c_int, [_client_p, _pp(RemovedImages)]),
    "sbx_image_free": (None, [POINTER(Image)]),
    "sbx_image_list_free": (None, [POINTER(ImageList)]),
    "sbx_removed_images_free": (None, [POINTER(RemovedImages)]),
    "sbx_snapshot": (c_int, [_client_p, c_char_p, c_char_p, _pp(Image)]),
    "sbx_image_export": (c_int, [_client_p, c_char_p, c_int, _pp(Image)]),
    "sbx_fork": (c_int, [_client_p, c_char_p, POINTER(ForkOpts), _pp(Fork)]),
    "sbx_fork_free": (None, [POINTER(Fork)]),
    "sbx_file_event_kind_name": (c_char_p, [c_int]),
    "sbx_watch_open": (c_int, [_client_p, c_char_p, c_char_p, POINTER(WatchOpts), POINTER(c_void_p)]),
    "sbx_watch_next": (c_int, [c_void_p, c_int64, _pp(FileEvents)]),
    "sbx_watch_close": (None, [c_void_p]),
    "sbx_file_events_free": (None, [POINTER(FileEvents)]),
    "sbx_open_port": (c_int, [_client_p, c_char_p, c_uint32, c_char_p, POINTER(c_int)]),
}

# ---- loading --------------------------------------------------------------------------

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None

_HERE = os.path.dirname(os.path.abspath(__file__))


def _tree_root() -> Optional[str]:
    """The source tree this package runs from (client/python/sbx/ in it), or None."""
    root = os.path.normpath(os.path.join(_HERE, os.pardir, os.pardir, os.pardir))
    if os.path.isfile(os.path.join(root, "client", "sbx.h")):
        return root
    return None


def _candidates() -> List[str]:
    """Where to look for libsbx, in order (see the module docstring of sbx)."""
    out: List[str] = []
    env = os.environ.get("SBX_LIBSBX")
    if env:
        return [env]  # an explicit choice: no fallback that would hide a typo
    root = _tree_root()
    if root:
        build = os.environ.get("SBX_BUILD") or "build"
        out.append(os.path.join(root, build, "libsbx.so"))
    try:  # written by `make install`: the LIBDIR the library went to
        from . import _installed  # type: ignore[attr-defined]

        out.append(os.path.join(_installed.LIBDIR, "libsbx.so.0"))
    except ImportError:
        pass
    found = ctypes.util.find_library("sbx")
    if found:
        out.append(found)
    out.append("libsbx.so.0")
    return out


def _load() -> ctypes.CDLL:
    global _path
    errors = []
    for cand in _candidates():
        if os.sep in cand and not os.path.exists(cand):
            errors.append(f"{cand}: no such file")
            continue
        try:
            handle = ctypes.CDLL(cand)
        except OSError as e:
            errors.append(f"{cand}: {e}")
            continue
        _path = cand
        return handle
    raise LibraryError(
        "cannot load libsbx (tried: "
        + "; ".join(errors)
        + "). Set SBX_LIBSBX to the path of libsbx.so, or install sbxd with `make install`"
        + " (and run ldconfig)."
    )


def _declare(handle: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(handle, name)
        except AttributeError:
            raise LibraryError(f"{_path} has no {name}: libsbx is older than this binding")
        fn.restype = restype
        fn.argtypes = argtypes


def _init_probe(init: Callable[[Any], None], struct: Any) -> bytes:
    """Runs init on a sentinel-filled buffer 64 bytes larger than struct and returns the
    struct's bytes after it. An init function clears its struct with memset(p, 0,
    sizeof(*p)), so a libsbx struct larger than ours shows in the sentinel tail, and a
    smaller one leaves sentinel bytes inside ours (which the callers' comparison sees)."""
    size = ctypes.sizeof(struct)
    buf = (ctypes.c_ubyte * (size + 64))()
    ctypes.memset(buf, 0xA5, size + 64)
    init(buf)
    if any(b != 0xA5 for b in buf[size:]):
        raise LibraryError(
            f"{_path}: struct {struct.__name__} of libsbx is larger than the {size} bytes "
            "this binding assumes; client/python/sbx/_lib.py does not match client/sbx.h"
        )
    return bytes(buf[:size])


def _self_check(handle: ctypes.CDLL) -> None:
    """Compares what libsbx shows of its layout with the structs above (see the module
    docstring); raises LibraryError on a mismatch."""
    from ._types import Code, FileEventKind, Outcome, State

    def bad(what: str) -> LibraryError:
        return LibraryError(
            f"{_path}: {what}; client/python/sbx/_lib.py does not match client/sbx.h"
        )

    # sbx_policy_init: all zero but protect_defaults = 1 (network none is 0).
    if _init_probe(handle.sbx_policy_init, Policy) != bytes(Policy(protect_defaults=1)):
        raise bad("sbx_policy_init() does not fill struct sbx_policy as laid out here")
    # sbx_policy_workspace_write: writable_paths, network and protect_defaults.
    roots = (c_char_p * 2)(b"/a", b"/b")
    p = Policy()
    handle.sbx_policy_workspace_write(ctypes.byref(p), roots, 2, 1)
    if (
        ctypes.cast(p.writable_paths.v, c_void_p).value != ctypes.addressof(roots)
        or p.writable_paths.n != 2
        or p.network != 1
        or p.protect_defaults != 1
    ):
        raise bad("sbx_policy_workspace_write() fills other offsets than struct sbx_policy")
    # sbx_create_opts_init: all zero but policy.protect_defaults = 1.
    want = CreateOpts()
    want.policy.protect_defaults = 1
    if _init_probe(handle.sbx_create_opts_init, CreateOpts) != bytes(want):
        raise bad("sbx_create_opts_init() does not fill struct sbx_create_opts as laid out here")
    # sbx_exec_opts_init: all zero.
    if _init_probe(handle.sbx_exec_opts_init, ExecOpts) != bytes(ExecOpts()):
        raise bad("sbx_exec_opts_init() does not clear struct sbx_exec_opts as laid out here")
    # The enums, by the names libsbx gives their values.
    for enum_type, fn, upper in (
        (Code, handle.sbx_code_name, True),
        (State, handle.sbx_state_name, False),
        (Outcome, handle.sbx_outcome_name, False),
        (FileEventKind, handle.sbx_file_event_kind_name, False),
    ):
        for member in enum_type:
            if int(member) < 0:
                continue  # the binding's own (FileEventKind.OVERFLOW)
            got = (fn(int(member)) or b"").decode()
            expected = member.name if upper else member.name.lower()
            if got != expected:
                raise bad(
                    f"value {int(member)} of {enum_type.__name__} is '{got}' in libsbx, "
                    f"'{expected}' here"
                )


def lib() -> ctypes.CDLL:
    """The loaded, declared and checked libsbx (loaded on the first call)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            handle = _load()
            _declare(handle)
            _self_check(handle)
            _lib = handle
    return _lib


def library_path() -> Optional[str]:
    """The path or name libsbx was loaded from (None before the first use)."""
    return _path
