"""test_sbx.py: the Python binding (client/python/sbx) against a real sbxd.

Each test class that needs a daemon starts build/sbxd itself (``$SBX_BUILD``, default
``build``) as the current user on a socket and state directory of its own under a
temporary base directory, waits until the socket accepts, and stops it in its class
cleanup (SIGTERM, then a bounded wait, then SIGKILL) even when a test or the set-up
failed; the daemon also gets SIGTERM if this process dies (PR_SET_PDEATHSIG), as in
tests/itutil.c. The base directory is under /var/tmp because a sandbox sees the
host's /var/tmp but has a /tmp of its own (writable-path tests need host paths it can
see). Every exception class is provoked for real where sbxd or libsbx produce it (two
fake daemons stand in for the codes a real one does not send on demand) and also
constructed through error_from_code, the binding's one mapping.

Run with tests/python/run.py (it prints the summary line tests/run.sh counts).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import dataclasses
import errno
import fcntl
import os
import pydoc
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))
BUILD = os.path.abspath(os.path.join(ROOT, os.environ.get("SBX_BUILD") or "build"))
PYDIR = os.path.join(ROOT, "client", "python")
os.environ.setdefault("SBX_LIBSBX", os.path.join(BUILD, "libsbx.so"))
if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

import sbx  # noqa: E402
from sbx import _client, _lib  # noqa: E402

PR_SET_PDEATHSIG = 1


def _pdeathsig() -> None:  # in the child, before exec
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _accepts(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Daemon:
    """One sbxd of a test class: started on base/NAME/{sock,state,log}."""

    def __init__(self, base: str, name: str, extra: Sequence[str] = ()) -> None:
        self.dir = os.path.join(base, name)
        os.makedirs(self.dir, exist_ok=True)
        self.sock = os.path.join(self.dir, "sbxd.sock")
        self.state = os.path.join(self.dir, "state")
        self.log = os.path.join(self.dir, "sbxd.log")
        self.extra = list(extra)
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        args = [os.path.join(BUILD, "sbxd"), "--socket", self.sock, "--state-dir", self.state,
                "--log-level", "debug", *self.extra]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True, preexec_fn=_pdeathsig)
        t0 = time.monotonic()
        while not _accepts(self.sock):
            if self.proc.poll() is not None:
                with open(self.log, errors="replace") as f:
                    sys.stderr.write(f.read())
                raise AssertionError(f"sbxd exited at start-up (status {self.proc.returncode}); log above")
            if time.monotonic() - t0 > 10:
                raise AssertionError("sbxd did not listen within 10 s")
            time.sleep(0.02)

    def stop(self) -> Optional[int]:
        """SIGTERM and a wait of 20 s at most (then SIGKILL); returns the exit status."""
        p, self.proc = self.proc, None
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.send_signal(signal.SIGCONT)  # in case a test left it stopped
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                sys.stderr.write(f"test_sbx: daemon {p.pid} did not stop; killing it\n")
                p.kill()
                p.wait()
                self._remove_cgroups()
        return p.returncode

    def _remove_cgroups(self) -> None:
        """After a SIGKILL: the cgroups the daemon logged it made, depth first, killing
        what is still in them (its sandboxes: ours)."""
        try:
            with open(self.log, errors="replace") as f:
                roots = {ln.split("cgroups under ", 1)[1].strip() for ln in f if "cgroups under " in ln}
        except OSError:
            return
        for root in roots:
            for d, _subdirs, _files in sorted(os.walk(root, topdown=False), key=lambda w: -len(w[0])):
                for _ in range(40):
                    try:
                        os.rmdir(d)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        try:
                            with open(os.path.join(d, "cgroup.procs")) as f:
                                for pid in f.read().split():
                                    os.kill(int(pid), signal.SIGKILL)
                        except OSError:
                            pass
                        time.sleep(0.05)


def _remove_reservations(base: str) -> None:
    """The sandbox uid range reservations of the root daemons started under base, left
    in /var/lib/sbxd-uids (a file per range naming its state directory, kept while that
    directory records it: sbxd(8)), removed with base once those daemons have stopped;
    under the directory's lock, as a daemon takes it."""
    try:
        dfd = os.open("/var/lib/sbxd-uids", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        fcntl.flock(dfd, fcntl.LOCK_EX)
        for name in os.listdir(dfd):
            try:
                with open(os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd), "rb") as f:
                    mine = f"\nstate {base}/".encode() in f.read(8192)
                if mine:
                    os.unlink(name, dir_fd=dfd)
            except OSError:
                pass
    finally:
        os.close(dfd)


class DaemonTest(unittest.TestCase):
    """A test class with a daemon of its own (``cls.daemon``) and a Client on it."""

    daemon_flags: Sequence[str] = ()
    base: str
    daemon: Daemon
    client: sbx.Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.base = tempfile.mkdtemp(prefix="sbxd-py.", dir="/var/tmp")
        os.chmod(cls.base, 0o755)
        cls.addClassCleanup(shutil.rmtree, cls.base, True)
        cls.addClassCleanup(_remove_reservations, cls.base)  # after the daemon stops (LIFO)
        cls.daemon = Daemon(cls.base, "d", cls.daemon_flags)
        cls.addClassCleanup(cls.daemon.stop)  # runs even when start() fails halfway
        cls.daemon.start()
        cls.client = sbx.Client(cls.daemon.sock, client_name="test_sbx")
        cls.addClassCleanup(cls.client.close)  # before the daemon stops (LIFO)

    _n = 0

    @classmethod
    def uid(cls, stem: str) -> str:
        """A sandbox ID not used before (IDs are never reused)."""
        DaemonTest._n += 1
        return f"py-{stem}-{os.getpid()}-{DaemonTest._n}"


# ---- no daemon ------------------------------------------------------------------------


class LayoutTest(unittest.TestCase):
    """The ctypes structs against client/sbx.h, and the loader."""

    def test_structs_match_the_header(self) -> None:
        cc = shutil.which("cc") or shutil.which("gcc")
        self.assertIsNotNone(cc, "a C compiler is needed to compare layouts (build-essential)")
        lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "sbx.h"', "int main(void) {"]
        for cname, st in _lib.STRUCTS.items():
            lines.append(f'printf("{cname} %zu\\n", sizeof(struct {cname}));')
            for fname, _t in st._fields_:
                lines.append(f'printf("{cname}.{fname} %zu\\n", offsetof(struct {cname}, {fname}));')
        lines.append("return 0; }")
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines))
            subprocess.run([cc, "-I", os.path.join(ROOT, "client"), "-o", exe, src], check=True)
            out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
        c_side = dict(line.rsplit(" ", 1) for line in out.splitlines())
        checked = 0
        for cname, st in _lib.STRUCTS.items():
            self.assertEqual(int(c_side[cname]), ctypes.sizeof(st), f"sizeof(struct {cname})")
            for fname, _t in st._fields_:
                self.assertEqual(int(c_side[f"{cname}.{fname}"]), getattr(st, fname).offset,
                                 f"offsetof(struct {cname}, {fname})")
                checked += 1
        self.assertGreater(checked, 150)

    def _limit_table(self) -> List[Tuple[str, int, str]]:
        """(field, bit, type) of each row of SBX_LIMIT_TABLE (client/libsbx_limit_table.h),
        in its order, as the C compiler expands it."""
        cc = shutil.which("cc") or shutil.which("gcc")
        self.assertIsNotNone(cc, "a C compiler is needed to read the table (build-essential)")
        src_text = "\n".join([
            "#include <stdio.h>",
            '#include "libsbx_limit_table.h"',
            "#define ROW(bit, name, field, type, ...) "
            'printf("%s %u %s\\n", #field, (unsigned)(bit), #type);',
            "int main(void) { SBX_LIMIT_TABLE(ROW) return 0; }",
        ])
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "limits.c"), os.path.join(d, "limits")
            with open(src, "w") as f:
                f.write(src_text)
            subprocess.run([cc, "-I", os.path.join(ROOT, "client"), "-o", exe, src], check=True)
            out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
        rows = [line.split(" ") for line in out.splitlines()]
        return [(field, int(bit), ctype) for field, bit, ctype in rows]

    def test_limits_match_the_table(self) -> None:
        """The binding's limits (LIMITS, ResourceLimits, the Limits struct) are the table's,
        in its order, with its bits and a Python type for each C type."""
        py_type = {"U64": int, "U32": int, "DOUBLE": float, "BOOL": bool}
        table = self._limit_table()
        self.assertEqual(len(table), 12)
        self.assertEqual([(f, bit, py_type[t]) for f, bit, t in table], _lib.LIMITS)
        fields = [f for f, _bit, _t in table]
        self.assertEqual([f.name for f in dataclasses.fields(sbx.ResourceLimits)], fields)
        self.assertEqual([name for name, _t in _lib.Limits._fields_][1:], fields)

    def test_limits_round_trip(self) -> None:
        """Each limit crosses to the C struct and back through LIMITS, unset ones as None."""
        every = sbx.ResourceLimits(memory_bytes=1 << 30, cpu_seconds=1.5, cpu_percent=50,
                                   processes=9, file_size_bytes=0, open_files=64,
                                   core_dumps=True, tmp_bytes=1 << 20, commands=2,
                                   queued_commands=0, disk_bytes=1 << 31, disk_inodes=100)
        for limits in (every, sbx.ResourceLimits(), sbx.ResourceLimits(core_dumps=False)):
            pol = _lib.Policy()
            keep: List[object] = []
            _client._policy_to_c(sbx.SandboxPolicy(limits=limits), pol, keep)
            self.assertEqual(_client._policy_from_c(pol).limits, limits)

    def test_self_check_catches_a_mismatch(self) -> None:
        lib = _lib.lib()  # the real check passed on load
        fields = _lib.ExecOpts._fields_

        # The last fields, as many as it takes to make it smaller (an int alone may hide
        # in the padding).
        cut = len(fields) - 1
        while ctypes.sizeof(type("S", (ctypes.Structure,), {"_fields_": fields[:cut]})) == \
                ctypes.sizeof(_lib.ExecOpts):
            cut -= 1

        class Shorter(ctypes.Structure):
            _fields_ = fields[:cut]

        class Longer(ctypes.Structure):
            _fields_ = fields + [("extra", ctypes.c_uint64)]

        with self.assertRaisesRegex(_lib.LibraryError, "larger than"):
            _lib._init_probe(lib.sbx_exec_opts_init, Shorter)
        self.assertNotEqual(_lib._init_probe(lib.sbx_exec_opts_init, Longer), bytes(Longer()))
        # An enum value out of step is seen through the name functions.
        self.assertEqual(lib.sbx_outcome_name(int(sbx.Outcome.START_FAILED)), b"start_failed")

    def _py(self, code: str, **env: str) -> subprocess.CompletedProcess:
        e = dict(os.environ, PYTHONPATH=PYDIR, **env)
        return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=60)

    def test_missing_library_is_a_clear_error_and_help_still_works(self) -> None:
        r = self._py("import sbx, pydoc; print(len(pydoc.render_doc(sbx))); sbx.Client()",
                     SBX_LIBSBX="/nonexistent/libsbx.so")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("LibraryError", r.stderr)
        self.assertIn("/nonexistent/libsbx.so", r.stderr)
        self.assertGreater(int(r.stdout.split()[0]), 5000)

    def test_help_reads_well(self) -> None:
        doc = pydoc.render_doc(sbx, renderer=pydoc.plaintext)
        for word in ("Client", "Sandbox", "SbxError", "SandboxEnded", "asyncio.to_thread",
                     "check=True", "run(", "read_file", "SandboxPolicy"):
            self.assertIn(word, doc)
        for name in sbx.__all__:
            obj = getattr(sbx, name)
            if isinstance(obj, type):
                self.assertTrue(obj.__doc__, f"sbx.{name} has no docstring")
                self.assertEqual(obj.__module__, "sbx", name)

    def test_version_command(self) -> None:
        e = dict(os.environ, PYTHONPATH=PYDIR)
        r = subprocess.run([sys.executable, "-m", "sbx", "--version"], env=e, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"sbx {sbx.__version__}", r.stdout)
        self.assertIn(os.environ["SBX_LIBSBX"], r.stdout)

    def test_installed_layout_finds_libdir(self) -> None:
        """As `make install` lays it out: the package outside the tree with _installed.py
        naming LIBDIR, libsbx.so.0 there, no SBX_LIBSBX."""
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(os.path.join(PYDIR, "sbx"), os.path.join(d, "py", "sbx"))
            os.makedirs(os.path.join(d, "lib"))
            shutil.copy(os.environ["SBX_LIBSBX"], os.path.join(d, "lib", "libsbx.so.0"))
            with open(os.path.join(d, "py", "sbx", "_installed.py"), "w") as f:
                f.write(f"LIBDIR = {os.path.join(d, 'lib')!r}\n")
            env = {k: v for k, v in os.environ.items() if k not in ("SBX_LIBSBX", "SBX_BUILD")}
            env["PYTHONPATH"] = os.path.join(d, "py")
            r = subprocess.run([sys.executable, "-c", "import sbx._lib as L; L.lib(); print(L.library_path())"],
                               env=env, capture_output=True, text=True, timeout=60, cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), os.path.join(d, "lib", "libsbx.so.0"))


class DocsTest(unittest.TestCase):
    """The README and docs/ read as Markdown should (here, beside the other checks of
    the tree's text, rather than in a test program of its own): merges once left a
    heading glued to the paragraph above it, and the Python API bullet with its
    signature and its list of methods twice, interleaved."""

    #: What that merge left (README.md before the docs split), for the detector's own test.
    GARBLED = (
        "- `Sandbox`: `run(command, timeout=, cwd=, env=, stdin=, max_output_bytes=,\n"
        "  on_output=, on_started=, queue_timeout=, on_queued=, check=, background=,\n"
        "  stdin_open=)` returns a `Result` (with `background=True` a `Command`, see Background\n"
        "  commands) with\n"
        "  on_output=, on_started=, queue_timeout=, on_queued=, check=, tty=, rows=, cols=)` "
        "returns a `Result` with\n"
        "  the seeds' fields; `read_file`, `read_text`,\n"
        "  `set_timeout`, `terminate`, `info`, `history`, `cancel`, `signal`, `command(id)`; a context\n"
        "  `set_timeout`, `terminate`, `info`, `history`, `cancel`, `signal`, `resize` (a\n"
        "  `tty=True` command's terminal); a context manager.\n")

    @staticmethod
    def _problems(text: str) -> List[str]:
        """Headings without a blank line around them, and paragraphs (or bullets) where
        a run of six code words (with ` or =) comes twice: a merge's leftover."""
        lines, out = text.split("\n"), []
        fence, para = False, []

        def end_para() -> None:
            words = [w for w in " ".join(para).split()]
            seen: Dict[Tuple[str, ...], int] = {}
            for i in range(len(words) - 5):
                run = tuple(words[i:i + 6])
                if all("`" in w or "=" in w for w in run):
                    if run in seen and i - seen[run] >= 6:
                        out.append(f"doubled in one paragraph: {' '.join(run)}")
                        break
                    seen.setdefault(run, i)
            para.clear()

        for i, line in enumerate(lines):
            if line.startswith("```"):
                fence = not fence
                end_para()
                continue
            if fence or line.startswith("    ") or line.startswith("|") or not line.strip():
                end_para()
                continue
            if line.startswith("#"):
                end_para()
                if (i and lines[i - 1].strip()) or (i + 1 < len(lines) and lines[i + 1].strip()):
                    out.append(f"line {i + 1}: no blank line around {line!r}")
                continue
            if line.lstrip().startswith("- "):
                end_para()
            para.append(line)
        end_para()
        return out

    def test_the_detector_sees_the_old_merge(self) -> None:
        self.assertTrue(self._problems(self.GARBLED))
        self.assertTrue(self._problems("text\n### Terminals\n\nmore\n"))
        self.assertEqual(self._problems("text\n\n### Terminals\n\nmore\n"), [])

    def test_headings_stand_apart_and_nothing_is_doubled(self) -> None:
        docs = os.path.join(ROOT, "docs")
        for path in [os.path.join(ROOT, "README.md")] + sorted(
                os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md")):
            with open(path, encoding="utf-8") as f:
                self.assertEqual(self._problems(f.read()), [], os.path.relpath(path, ROOT))


class ErrorMappingTest(unittest.TestCase):
    """error_from_code: every code to its class, under SbxError."""

    EXPECTED = {
        sbx.Code.INVALID_ARGUMENT: (sbx.InvalidArgument, ValueError),
        sbx.Code.NOT_FOUND: (sbx.NotFound, LookupError),
        sbx.Code.ALREADY_EXISTS: (sbx.AlreadyExists, sbx.SbxError),
        sbx.Code.PERMISSION_DENIED: (sbx.PermissionDenied, PermissionError),
        sbx.Code.RESOURCE_EXHAUSTED: (sbx.ResourceExhausted, sbx.SbxError),
        sbx.Code.FAILED_PRECONDITION: (sbx.FailedPrecondition, sbx.SbxError),
        sbx.Code.READ_ONLY: (sbx.ReadOnly, sbx.SbxError),
        sbx.Code.TOO_LARGE: (sbx.TooLarge, sbx.SbxError),
        sbx.Code.UNAVAILABLE: (sbx.Unavailable, ConnectionError),
        sbx.Code.UNIMPLEMENTED: (sbx.Unimplemented, NotImplementedError),
        sbx.Code.INTERNAL: (sbx.Internal, sbx.SbxError),
        sbx.Code.SANDBOX_ENDED: (sbx.SandboxEnded, sbx.SbxError),
    }

    def test_every_code(self) -> None:
        self.assertEqual(set(self.EXPECTED), set(sbx.Code) - {sbx.Code.OK})
        for code, (cls, builtin) in self.EXPECTED.items():
            e = sbx.error_from_code(int(code), "what went wrong", errno.EIO)
            self.assertIs(type(e), cls)
            self.assertIsInstance(e, sbx.SbxError)
            self.assertIsInstance(e, builtin)
            self.assertEqual(e.code, code)
            self.assertEqual(e.message, "what went wrong")
            self.assertEqual(e.errno, errno.EIO)
            self.assertEqual(str(e), f"{code.name}: what went wrong")
            self.assertIsNone(e.result)
            with self.assertRaises(cls):
                raise e

    def test_sandbox_ended_is_terminal_not_unavailable(self) -> None:
        e = sbx.error_from_code(12, "sandbox 'x' has ended", 0)
        self.assertIs(type(e), sbx.SandboxEnded)
        self.assertEqual(e.code, sbx.Code.SANDBOX_ENDED)
        # Retry logic catches Unavailable / ConnectionError: an ended sandbox must not
        # be caught there.
        self.assertNotIsInstance(e, sbx.Unavailable)
        self.assertNotIsInstance(e, ConnectionError)
        # UNAVAILABLE is the daemon out of reach, whatever the errno.
        self.assertIs(type(sbx.error_from_code(9, "busy", 0)), sbx.Unavailable)
        self.assertIs(type(sbx.error_from_code(9, "lost", errno.ECONNRESET)), sbx.Unavailable)

    def test_unknown_and_ok(self) -> None:
        e = sbx.error_from_code(99, "new", 0)
        self.assertIs(type(e), sbx.Internal)
        self.assertIn("99", e.message)
        with self.assertRaises(ValueError):
            sbx.error_from_code(0, "fine")

    def test_command_errors(self) -> None:
        r = sbx.Result(exit_code=-9, stdout="", stderr="", timed_out=True, outcome=sbx.Outcome.TIMED_OUT)
        with self.assertRaises(sbx.Timeout) as cm:
            r.check()
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertIsInstance(cm.exception, sbx.CommandError)
        # e.code.name works for every exception (the README's pattern): the outcome.
        self.assertEqual(cm.exception.code, sbx.Outcome.TIMED_OUT)
        self.assertEqual(cm.exception.code.name, "TIMED_OUT")
        self.assertTrue(str(cm.exception).startswith("TIMED_OUT: "), str(cm.exception))
        self.assertIs(cm.exception.result, r)
        r = sbx.Result(exit_code=2, stdout="", stderr="boom\n", outcome=sbx.Outcome.EXITED)
        with self.assertRaisesRegex(sbx.CommandFailed, "status 2: boom") as cm:
            r.check()
        self.assertEqual(cm.exception.code.name, "EXITED")
        r = sbx.Result(exit_code=-9, stdout="", stderr="", timed_out=True,
                       outcome=sbx.Outcome.SIGNALED, signal=9)
        with self.assertRaises(sbx.Timeout) as cm:
            r.check()
        self.assertEqual(cm.exception.code, sbx.Outcome.TIMED_OUT)
        r = sbx.Result(exit_code=None, stdout="", stderr="", outcome=sbx.Outcome.SANDBOX_ENDED)
        with self.assertRaises(sbx.SandboxEnded):
            r.check()
        r = sbx.Result(exit_code=None, stdout="", stderr="", outcome=sbx.Outcome.QUEUE_TIMEOUT,
                       queued_ms=60000, sandbox="s", command_id="c-7")
        with self.assertRaisesRegex(sbx.CommandFailed, "c-7 never ran: no slot in sandbox 's' within 60 s"):
            r.check()
        ok = sbx.Result(exit_code=0, stdout="", stderr="", outcome=sbx.Outcome.EXITED)
        self.assertIs(ok.check(), ok)


class FakeDaemon:
    """A socket that answers like a daemon that is not sbxd: 'unimplemented' answers
    every request with UNIMPLEMENTED; 'garbage' with a frame that does not decode;
    'queue' answers a RunCommand as a sandbox at its command cap does: CommandQueued
    (when streamed) and a QUEUE_TIMEOUT result that waited queue_timeout_ms (777 when
    absent), and every other request (Hello) with UNIMPLEMENTED. ``runs`` keeps the
    fields of each RunCommand."""

    def __init__(self, path: str, mode: str) -> None:
        self.path, self.mode = path, mode
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        self.stopping = False
        self.runs: list = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @staticmethod
    def _varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def _request_id(self, payload: bytes) -> int:
        if not payload or payload[0] != 0x08:  # field 1, varint
            return 0
        n, shift = 0, 0
        for b in payload[1:]:
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        return n

    @staticmethod
    def _fields(b: bytes) -> dict:
        """The fields of a protobuf message: number -> int (varint) or bytes (length
        delimited); the last one of a number wins."""
        out, i = {}, 0
        while i < len(b):
            key, i = FakeDaemon._read_varint(b, i)
            if key & 7 == 0:
                out[key >> 3], i = FakeDaemon._read_varint(b, i)
            elif key & 7 == 2:
                n, i = FakeDaemon._read_varint(b, i)
                out[key >> 3], i = b[i:i + n], i + n
            else:
                raise ValueError(f"wire type {key & 7}")
        return out

    @staticmethod
    def _read_varint(b: bytes, i: int) -> tuple:
        n, shift = 0, 0
        while True:
            n |= (b[i] & 0x7F) << shift
            shift += 7
            i += 1
            if not b[i - 1] & 0x80:
                return n, i

    def _msg(self, *fields: tuple) -> bytes:
        out = b""
        for num, v in fields:
            if isinstance(v, int):
                out += self._varint(num << 3) + self._varint(v)
            else:
                out += self._varint(num << 3 | 2) + self._varint(len(v)) + v
        return out

    def _frame(self, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + payload

    def _queue_replies(self, rid: int, run: dict) -> bytes:
        self.runs.append(run)
        waited = run.get(12, 777)
        out = b""
        if run.get(10):  # stream: CommandQueued first
            q = self._msg((1, b"c-1"), (2, run.get(1, b"")), (3, 2))
            out += self._frame(self._msg((1, rid), (22, q)))
        res = self._msg((1, b"c-1"), (2, run.get(1, b"")), (3, 10), (21, waited))
        return out + self._frame(self._msg((1, rid), (2, self._msg((1, 0))), (14, res)))

    def _reply(self, rid: int, payload: bytes = b"") -> bytes:
        if self.mode == "queue":
            req = self._fields(payload)
            if 12 in req:  # RunCommand
                return self._queue_replies(rid, self._fields(req[12]))
        if self.mode == "garbage":
            payload = b"\xff\xff\xff\xff"
        else:
            msg = b"this fake daemon implements nothing"
            status = b"\x08" + self._varint(10) + b"\x12" + self._varint(len(msg)) + msg
            payload = b"\x08" + self._varint(rid) + b"\x12" + self._varint(len(status)) + status
        return struct.pack(">I", len(payload)) + payload

    def _serve(self) -> None:
        while not self.stopping:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while True:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        break
                    if not data:
                        break
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                        n = struct.unpack(">I", buf[:4])[0]
                        payload, buf = buf[4:4 + n], buf[4 + n:]
                        conn.sendall(self._reply(self._request_id(payload), payload))

    def close(self) -> None:
        self.stopping = True
        self.srv.close()


class FakeDaemonTest(unittest.TestCase):
    """The codes a real sbxd does not send on demand: UNIMPLEMENTED and INTERNAL."""

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sbx-fake.")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_unimplemented(self) -> None:
        fake = FakeDaemon(os.path.join(self.dir, "s"), "unimplemented")
        self.addCleanup(fake.close)
        with sbx.Client(fake.path) as c:  # a daemon without Hello is still a daemon
            with self.assertRaisesRegex(sbx.Unimplemented, "does not answer Hello") as cm:
                c.hello()
            self.assertEqual(cm.exception.code, sbx.Code.UNIMPLEMENTED)
            with self.assertRaisesRegex(sbx.Unimplemented, "implements nothing"):
                c.get("x")
            with self.assertRaises(sbx.Unimplemented):
                c.list()

    def test_internal_on_a_protocol_error(self) -> None:
        fake = FakeDaemon(os.path.join(self.dir, "s"), "garbage")
        self.addCleanup(fake.close)
        with self.assertRaisesRegex(sbx.Internal, "does not decode") as cm:
            sbx.Client(fake.path)
        self.assertEqual(cm.exception.errno, errno.EBADMSG)

    def test_queue_timeout_and_on_queued(self) -> None:
        fake = FakeDaemon(os.path.join(self.dir, "s"), "queue")
        self.addCleanup(fake.close)
        seen = []
        with sbx.Client(fake.path) as c:
            sb = sbx.Sandbox(c, "box")  # attach() would ask the fake for it
            r = sb.run("true", queue_timeout=2.5, on_queued=lambda cid, ahead: seen.append((cid, ahead)))
            self.assertEqual(seen, [("c-1", 2)])
            self.assertEqual(r.outcome, sbx.Outcome.QUEUE_TIMEOUT)
            self.assertEqual(str(r.outcome), "queue_timeout")
            self.assertEqual(r.queued_ms, 2500)
            self.assertIsNone(r.exit_code)
            self.assertFalse(r.succeeded)
            with self.assertRaisesRegex(sbx.CommandFailed, "never ran: no slot in sandbox 'box' within 2.5 s"):
                r.check()
            # 0: never wait, sent as given; without on_queued nothing asks for a stream.
            r = sb.run("true", queue_timeout=0)
            self.assertEqual(r.queued_ms, 0)
            # Absent: the daemon's default.
            r = sb.run("true")
            self.assertEqual(r.queued_ms, 777)
            with self.assertRaises(ValueError):
                sb.run("true", queue_timeout=-1)
            # An exception of on_queued comes back once the call is over.
            def boom(cid: str, ahead: int) -> None:
                raise KeyError(cid)
            with self.assertRaises(KeyError):
                sb.run("true", on_queued=boom)
        self.assertEqual([(run.get(12), run.get(10)) for run in fake.runs],
                         [(2500, 1), (0, None), (None, None), (None, 1)])

    def test_unavailable_when_nothing_listens(self) -> None:
        with self.assertRaises(sbx.Unavailable) as cm:
            sbx.Client(os.path.join(self.dir, "nothing.sock"))
        self.assertIs(type(cm.exception), sbx.Unavailable)  # not SandboxEnded
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        self.assertIn("nothing.sock", cm.exception.message)


# ---- one daemon for the main API ------------------------------------------------------


class SandboxTest(DaemonTest):
    """Every Client and Sandbox method against one real daemon."""

    def setUp(self) -> None:
        self.sb = self.client.create(id=self.uid("t"), timeout=300)
        self.addCleanup(self.sb.terminate)

    # -- client --

    def test_hello_and_default_socket(self) -> None:
        h = self.client.hello()
        self.assertEqual(h.protocol_version, 1)
        self.assertEqual(h.daemon_version, sbx.__version__)
        self.assertIn(h.cgroup_version, ("v1", "v2", "none"))
        self.assertEqual(h.peer_uid, os.getuid())
        if h.rootless:
            self.assertEqual((h.sandbox_uid_count, h.uid_reservation), (0, None))
        else:
            self.assertEqual(h.sandbox_uid_count, 65536)
            self.assertEqual(h.uid_reservation, f"/var/lib/sbxd-uids/{h.sandbox_uid_first}")
            self.assertIn(h.uid_origin, ("recorded", "picked", "flag"))
        self.assertGreaterEqual(h.max_frame_bytes, 1 << 20)
        self.assertIsInstance(h.implemented, tuple)
        old = os.environ.get("SBX_SOCKET")
        os.environ["SBX_SOCKET"] = self.daemon.sock
        try:
            self.assertEqual(sbx.default_socket_path(), self.daemon.sock)
            with sbx.Client() as c:  # socket=None: the default, here $SBX_SOCKET
                self.assertEqual(c.socket, self.daemon.sock)
                self.assertEqual(c.get(self.sb.id).id, self.sb.id)
        finally:
            if old is None:
                del os.environ["SBX_SOCKET"]
            else:
                os.environ["SBX_SOCKET"] = old

    def test_check_command(self) -> None:
        e = dict(os.environ, PYTHONPATH=PYDIR)
        r = subprocess.run([sys.executable, "-m", "sbx", "--check", self.daemon.sock], env=e,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"sbxd {sbx.__version__} at {self.daemon.sock}", r.stdout)
        r = subprocess.run([sys.executable, "-m", "sbx", "--check", self.daemon.sock + ".none"],
                           env=e, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("UNAVAILABLE: cannot connect", r.stderr)

    def test_closed_client(self) -> None:
        c = sbx.Client(self.daemon.sock)
        sb = c.attach(self.sb.id)
        c.close()
        c.close()  # idempotent
        self.assertTrue(c.closed)
        with self.assertRaisesRegex(sbx.SbxError, "closed") as cm:
            sb.run("true")
        self.assertIs(type(cm.exception), sbx.SbxError)
        with sbx.Client(self.daemon.sock) as c2:
            self.assertFalse(c2.closed)
        self.assertTrue(c2.closed)

    def test_create_options_and_info(self) -> None:
        host = os.path.join(self.base, "rw")
        os.makedirs(host, exist_ok=True)
        sid = self.uid("opts")
        with self.client.create(
            sbx.SandboxPolicy(denied_read_paths=(os.path.join(self.base, "secret"),)),
            id=sid, timeout=120, idle_timeout=60, labels={"team": "py", "k": "v"},
            env={"GREETING": "hi there"}, writable=[host], network=sbx.NetworkMode.FULL,
            limits=sbx.ResourceLimits(open_files=128, file_size_bytes=1 << 20),
            share_uids=[12345], keep_workspace=False,
        ) as sb:
            self.assertEqual(sb.id, sid)
            self.assertTrue(sb.owned)
            i = sb.info()
            self.assertEqual(i.id, sid)
            self.assertEqual(i.state, sbx.State.READY)
            self.assertFalse(i.ended)
            self.assertEqual(i.owner_uid, os.getuid())
            self.assertEqual(dict(i.labels), {"team": "py", "k": "v"})
            self.assertEqual(i.idle_timeout_ms, 60000)
            self.assertAlmostEqual(i.deadline_unix_ms - i.created_unix_ms, 120000, delta=2000)
            self.assertIn(host, i.policy.writable_paths)
            self.assertIn(os.path.join(self.base, "secret"), i.policy.denied_read_paths)
            self.assertEqual(i.policy.network, sbx.NetworkMode.FULL)
            self.assertTrue(i.policy.protect_defaults)
            self.assertEqual(i.policy.limits.open_files, 128)
            self.assertEqual(i.policy.limits.file_size_bytes, 1 << 20)
            self.assertEqual(i.enforcement.get("open_files"), "rlimit")
            self.assertEqual(i.share_uids, (12345,))
            self.assertIsNone(i.end_reason)
            self.assertTrue(i.isolated)
            self.assertEqual(sb.run("echo $GREETING").stdout, "hi there\n")
            r = sb.run(f"echo from-sandbox > {host}/out && cat {host}/out")
            self.assertEqual(r.stdout, "from-sandbox\n", r.stderr)
            with open(os.path.join(host, "out")) as f:
                self.assertEqual(f.read(), "from-sandbox\n")
        self.assertEqual(self.client.get(sid).state, sbx.State.TERMINATED)

    def test_network_allowlist(self) -> None:
        # No real host is reached: each request here is refused before any resolution.
        with self.client.create(
            allowed_hosts=["Registry.TEST", "*.mirror.test:8443"],
            allowed_cidrs=["192.0.2.7/24"], id=self.uid("allow"),
        ) as sb:
            i = sb.info()
            self.assertEqual(i.policy.network, sbx.NetworkMode.ALLOWLIST)
            self.assertEqual(i.policy.allowed_hosts, ("registry.test", "*.mirror.test:8443"))
            self.assertEqual(i.policy.allowed_cidrs, ("192.0.2.0/24",))
            self.assertEqual(i.enforcement.get("network"), "proxy")
            r = sb.run("echo $HTTPS_PROXY $all_proxy; for u in http://other.test/ "
                       "http://198.51.100.1/; do curl -s -o /dev/null -w '%{http_code}\\n' $u; "
                       "done")
            self.assertEqual(r.stdout, "http://127.0.0.1:3128 http://127.0.0.1:3128\n403\n403\n",
                             r.stderr)
            conns = sb.connections()
            self.assertEqual([(c.host, c.port, c.allowed) for c in conns],
                             [("other.test", 80, False), ("198.51.100.1", 80, False)])
            self.assertIn("allowed_hosts", conns[0].reason)
            self.assertEqual(conns[1].address, "198.51.100.1")
            self.assertEqual(conns[0].method, "GET")
            page = sb.connections(after_seq=conns[0].seq, limit=1)
            self.assertEqual([c.seq for c in page], [conns[1].seq])
        with self.assertRaises(sbx.InvalidArgument):
            self.client.create(allowed_hosts=["10.0.0.1"])
        with self.assertRaises(sbx.InvalidArgument):
            self.client.create(network=sbx.NetworkMode.NONE, allowed_hosts=["a.test"])

    def test_policy_helpers(self) -> None:
        p = sbx.SandboxPolicy.workspace_write("~/proj", self.base, network=sbx.NetworkMode.FULL)
        self.assertEqual(p.writable_paths, (os.path.expanduser("~/proj"), self.base))
        self.assertEqual(p.network, sbx.NetworkMode.FULL)
        ro = sbx.SandboxPolicy.read_only(limits=sbx.ResourceLimits(processes=64))
        self.assertEqual(ro.writable_paths, ())
        self.assertEqual(ro.limits.processes, 64)
        self.assertIs(sbx.Policy, sbx.SandboxPolicy)
        with self.assertRaises(TypeError):
            sbx.SandboxPolicy(writable_paths="/one/path/not/a/list")
        host = os.path.join(self.base, "ww")
        os.makedirs(host, exist_ok=True)
        with self.client.create(sbx.SandboxPolicy.workspace_write(host)) as sb:
            self.assertTrue(sb.run(f"touch {host}/x").succeeded)
            self.assertTrue(os.path.exists(os.path.join(host, "x")))
        with self.client.create(sbx.SandboxPolicy.read_only()) as sb:
            r = sb.run(f"touch {host}/y")
            self.assertNotEqual(r.exit_code, 0)
            self.assertFalse(os.path.exists(os.path.join(host, "y")))

    def test_denied_read_path_is_not_found(self) -> None:
        secret = os.path.join(self.base, "secret.txt")
        with open(secret, "w") as f:
            f.write("s3cret")
        with self.client.create(sbx.SandboxPolicy(denied_read_paths=(secret,))) as sb:
            with self.assertRaisesRegex(sbx.NotFound, "denied_read_paths"):
                sb.read_file(secret)
            self.assertNotIn("s3cret", sb.run(f"cat {secret}").stdout)

    def test_list(self) -> None:
        tag = self.uid("lbl")
        a = self.client.create(labels={"suite": tag, "n": "1"})
        b = self.client.create(labels={"suite": tag, "n": "2"})
        try:
            live = self.client.list(labels={"suite": tag})
            self.assertIsInstance(live, sbx.SandboxList)
            self.assertEqual(sorted(s.id for s in live), sorted([a.id, b.id]))
            self.assertFalse(live.truncated)
            self.assertEqual([s.id for s in self.client.list(labels={"suite": tag, "n": "2"})], [b.id])
            one = self.client.list(labels={"suite": tag}, limit=1)
            self.assertEqual(len(one), 1)
            self.assertTrue(one.truncated)
            self.assertEqual(len(self.client.list(labels={"suite": tag}, owner_uid=os.getuid())), 2)
            self.assertEqual(len(self.client.list(labels={"suite": tag}, owner_uid=4242)), 0)
            a.terminate()
            self.assertEqual([s.id for s in self.client.list(labels={"suite": tag})], [b.id])
            every = self.client.list(labels={"suite": tag}, include_ended=True)
            self.assertEqual(sorted(s.id for s in every), sorted([a.id, b.id]))
            ended = self.client.list(labels={"suite": tag}, include_ended=True,
                                     states=[sbx.State.TERMINATED])
            self.assertEqual([s.id for s in ended], [a.id])
        finally:
            a.terminate()
            b.terminate()

    def test_get_describes_attach_works(self) -> None:
        # get() is a description; asked to run, it says attach() is the way.
        info = self.client.get(self.sb.id)
        self.assertIsInstance(info, sbx.SandboxInfo)
        with self.assertRaisesRegex(AttributeError,
                                    rf"no run\(\); Client.attach\('{self.sb.id}'\) gives a Sandbox"):
            info.run("true")
        self.assertFalse(hasattr(info, "write_file"))
        with self.assertRaisesRegex(AttributeError, "has no attribute 'nosuch'"):
            info.nosuch  # noqa: B018 - the access is the test
        # ... and from another process's Client, attach(id) runs in it.
        with sbx.Client(self.daemon.sock) as other:
            self.assertEqual(other.attach(self.sb.id).run("echo hi").stdout, "hi\n")

    def test_attach_shares_and_does_not_terminate(self) -> None:
        with sbx.Client(self.daemon.sock) as other:
            with other.attach(self.sb.id) as same:
                self.assertFalse(same.owned)
                same.write_file("shared.txt", "from the other client")
            self.assertEqual(self.sb.read_text("shared.txt"), "from the other client")
            self.assertEqual(self.client.get(self.sb.id).state, sbx.State.READY)

    def test_terminate_context_manager_and_ended(self) -> None:
        sid = self.uid("cm")
        with self.assertRaises(RuntimeError):
            with self.client.create(id=sid) as sb:
                self.assertEqual(sb.run("echo in").stdout, "in\n")
                raise RuntimeError("leaving the block by an exception")
        self.assertEqual(self.client.get(sid).state, sbx.State.TERMINATED)
        with self.assertRaisesRegex(sbx.SandboxEnded, "has ended") as cm:
            sb.run("true")
        self.assertEqual(cm.exception.code, sbx.Code.SANDBOX_ENDED)
        self.assertNotIsInstance(cm.exception, sbx.Unavailable)
        self.assertEqual(cm.exception.errno, 0)
        for call in (lambda: sb.read_file("x"), lambda: sb.write_file("x", "y"),
                     lambda: sb.list_directory(), lambda: sb.stat("/"), lambda: sb.mkdir("d"),
                     lambda: sb.remove("x"), lambda: sb.set_timeout(10)):
            with self.assertRaises(sbx.SandboxEnded):
                call()
        with self.assertRaisesRegex(sbx.SandboxEnded, "terminated"):
            self.client.attach(sid)
        info = sb.terminate()  # idempotent
        self.assertTrue(info.ended)
        self.assertTrue(info.end_reason)
        self.assertGreater(info.ended_unix_ms, 0)

    def test_set_timeout(self) -> None:
        i = self.sb.set_timeout(1000)
        now_ms = time.time() * 1000
        self.assertAlmostEqual(i.deadline_unix_ms, now_ms + 1000 * 1000, delta=5000)
        sb = self.client.create()
        sb.set_timeout(0.3)
        t0 = time.monotonic()
        while not self.client.get(sb.id).ended and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        self.assertLess(time.monotonic() - t0, 8, "the sandbox did not expire in time")
        self.assertEqual(self.client.get(sb.id).state, sbx.State.EXPIRED)
        with self.assertRaises(sbx.SandboxEnded):
            sb.run("true")
        sb.terminate()
        # idle_timeout: None is the daemon's default (an hour), 0 none at all.
        for idle, want in ((None, 3600 * 1000), (0, 0), (5, 5000)):
            s2 = self.client.create(idle_timeout=idle)
            self.addCleanup(s2.terminate)
            self.assertEqual(s2.info().idle_timeout_ms, want, f"idle_timeout={idle}")

    # -- run --

    def test_run_shell_and_argv(self) -> None:
        r = self.sb.run("echo one; echo two >&2; exit 3")
        self.assertIsInstance(r, sbx.Result)
        self.assertIs(sbx.SandboxResult, sbx.Result)
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "one\n", "two\n"))
        self.assertEqual(r.outcome, sbx.Outcome.EXITED)
        self.assertFalse(r.succeeded)
        self.assertFalse(r.timed_out)
        self.assertIsNone(r.signal)
        self.assertEqual(r.sandbox, self.sb.id)
        self.assertTrue(r.command_id.startswith("c-"))
        self.assertTrue(r.isolated)
        self.assertIsInstance(r.warnings, tuple)
        self.assertEqual(r.owner_uid, os.getuid())
        self.assertGreater(r.duration, 0)
        self.assertLess(r.duration, 10)
        self.assertEqual(r.stdout_total_bytes, 4)
        r = self.sb.run(["echo", "$HOME", "a b"])  # argv: no shell
        self.assertEqual(r.stdout, "$HOME a b\n")
        self.assertTrue(r.succeeded)
        with self.assertRaises(ValueError):
            self.sb.run([])

    def test_queue_timeout_with_a_free_slot(self) -> None:
        r = self.sb.run("echo hi", queue_timeout=5, on_queued=lambda cid, ahead: self.fail("queued"))
        self.assertTrue(r.succeeded)
        self.assertEqual(r.queued_ms, 0)
        self.assertEqual(self.sb.info().queued_commands, 0)
        self.assertEqual(self.sb.history()[-1].queued_ms, 0)

    def test_output_bytes_and_invalid_utf8(self) -> None:
        r = self.sb.run(r"printf 'ok\377\n'; printf '\376' >&2")
        self.assertEqual(r.stdout_bytes, b"ok\xff\n")
        self.assertEqual(r.stdout, "ok\ufffd\n")
        self.assertEqual(r.stderr_bytes, b"\xfe")
        self.assertEqual(r.stderr, "\ufffd")
        self.assertNotIn("stdout_bytes", repr(r))

    def test_cwd_env_stdin(self) -> None:
        r = self.sb.run("pwd; echo $A-$B", cwd="/tmp", env={"A": "1", "B": "x y"})
        self.assertEqual(r.stdout, "/tmp\n1-x y\n")
        self.assertEqual(self.sb.run("pwd").stdout, "/workspace\n")
        self.assertEqual(self.sb.run("cat", stdin="text ü").stdout, "text ü")
        self.assertEqual(self.sb.run(["wc", "-c"], stdin=b"\x00" * 1000).stdout.strip(), "1000")
        self.assertEqual(self.sb.run("cat", stdin=b"").stdout, "")
        with self.assertRaises(ValueError):
            self.sb.run("true", env={"A=B": "c"})

    def test_stdin_from_a_file_descriptor(self) -> None:
        rfd, wfd = os.pipe()
        payload = b"line\n" * 20000  # 100 kB, more than a pipe holds

        def feed() -> None:
            with os.fdopen(wfd, "wb") as w:
                w.write(payload)

        t = threading.Thread(target=feed)
        t.start()
        with os.fdopen(rfd, "rb") as r_file:
            r = self.sb.run(["wc", "-l"], stdin=r_file)
        t.join()
        self.assertEqual(r.stdout.strip(), "20000")

    def test_timeout(self) -> None:
        t0 = time.monotonic()
        r = self.sb.run(["sleep", "10"], timeout=0.2)
        self.assertLess(time.monotonic() - t0, 3)
        self.assertTrue(r.timed_out)
        self.assertEqual(r.outcome, sbx.Outcome.TIMED_OUT)
        self.assertIsNotNone(r.exit_code)
        self.assertLess(r.exit_code, 0)  # minus the signal, as subprocess does
        self.assertEqual(r.exit_code, -r.signal)
        self.assertFalse(r.succeeded)
        with self.assertRaises(sbx.Timeout) as cm:
            self.sb.run("sleep 10", timeout=0.2, check=True)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertTrue(cm.exception.result.timed_out)
        self.assertIn("timed out", str(cm.exception))
        self.assertEqual(cm.exception.code.name, "TIMED_OUT")
        self.assertEqual(cm.exception.result.timeout, 0.2)
        # No timeout is for a background command only: refused, and nothing runs.
        with self.assertRaisesRegex(ValueError, "timeout=0 \\(no timeout\\) is for background=True only"):
            self.sb.run("touch /workspace/ran", timeout=0)
        self.assertFalse(self.sb.exists("/workspace/ran"))
        self.assertEqual(self.sb.run("pgrep -x sleep || echo none").stdout, "none\n")

    def test_check(self) -> None:
        self.assertEqual(self.sb.run("echo fine", check=True).stdout, "fine\n")
        with self.assertRaisesRegex(sbx.CommandFailed, "status 4: bad thing") as cm:
            self.sb.run("echo bad thing >&2; exit 4", check=True)
        self.assertEqual(cm.exception.result.exit_code, 4)
        self.assertEqual(cm.exception.code, sbx.Outcome.EXITED)
        self.assertEqual(cm.exception.code.name, "EXITED")
        r = self.sb.run(["/no/such/program"])
        self.assertEqual(r.outcome, sbx.Outcome.START_FAILED)
        self.assertIsNone(r.exit_code)
        self.assertIn("/no/such/program", r.start_error)
        self.assertEqual(r.start_errno, errno.ENOENT)
        with self.assertRaisesRegex(sbx.CommandFailed, "did not start"):
            r.check()
        with self.assertRaisesRegex(sbx.CommandFailed, "signal 9"):
            self.sb.run("kill -9 $$", check=True)

    def test_truncation(self) -> None:
        r = self.sb.run("head -c 10000 /dev/zero | tr '\\0' a; printf END", max_output_bytes=100)
        self.assertTrue(r.stdout_truncated)
        self.assertFalse(r.stderr_truncated)
        self.assertEqual(len(r.stdout_bytes), 100)
        self.assertTrue(r.stdout.endswith("END"))  # the tail is kept
        self.assertEqual(r.stdout_total_bytes, 10003)
        with self.assertRaises(ValueError):
            self.sb.run("true", max_output_bytes=0)

    def test_resources_and_limits_hit(self) -> None:
        with self.client.create(limits=sbx.ResourceLimits(file_size_bytes=4096)) as sb:
            r = sb.run("exec head -c 100000 /dev/zero > big")
        self.assertEqual(r.signal, signal.SIGXFSZ)
        self.assertEqual(r.limits_hit, ("file_size",))
        self.assertEqual(r.resources.limits_hit, ("file_size",))
        self.assertEqual(r.resources.file_size_bytes, "rlimit")
        self.assertEqual(r.resources.enforcement["file_size"], "rlimit")
        self.assertIsInstance(r.resources.cpu_seconds_used, float)
        self.assertIsNotNone(r.resources.peak_memory_bytes)
        self.assertGreater(r.resources.peak_memory_bytes, 0)
        self.assertIn(r.resources.peak_memory_source, ("rusage", "cgroup_v1", "cgroup_v2"))

    def test_disk_limit(self) -> None:
        """disk_bytes/disk_inodes: reported with what enforces them; a write past the
        size fails inside and write_file raises ResourceExhausted naming the limit."""
        with self.assertRaisesRegex(sbx.InvalidArgument, r"minimum of 1048576 bytes \(1 MiB\)"):
            self.client.create(limits=sbx.ResourceLimits(disk_bytes=4096))
        with self.client.create(limits=sbx.ResourceLimits(disk_bytes=4 << 20, disk_inodes=64)) as sb:
            i = sb.info()
            self.assertEqual(i.policy.limits.disk_bytes, 4 << 20)
            self.assertEqual(i.policy.limits.disk_inodes, 64)
            self.assertIn(i.enforcement.get("disk"), ("filesystem_image", "tmpfs_size"))
            r = sb.run("head -c 10M /dev/zero > big; echo $?; stat -c %s big")
            code, size = r.stdout.split()
            self.assertEqual(code, "1", r.stderr)
            self.assertLessEqual(int(size), 4 << 20)
            self.assertIn("disk", r.limits_hit)
            sb.run("rm big")
            with self.assertRaisesRegex(sbx.ResourceExhausted, "disk limit"):
                sb.write_file("/workspace/huge", b"\0" * (5 << 20))

    def test_streaming(self) -> None:
        chunks: List[tuple] = []
        times: List[float] = []

        def on_output(stream: str, data: bytes) -> None:
            chunks.append((stream, data))
            times.append(time.monotonic())

        r = self.sb.run("for i in 1 2 3; do echo $i; sleep 0.2; done; echo E >&2",
                        on_output=on_output)
        self.assertEqual(b"".join(d for s, d in chunks if s == "stdout"), b"1\n2\n3\n")
        self.assertEqual(b"".join(d for s, d in chunks if s == "stderr"), b"E\n")
        # As they are written, not all at the end: 0.4 s at least from the first to the last.
        self.assertGreater(times[-1] - times[0], 0.3, "the chunks all came at the end")
        self.assertEqual((r.stdout, r.stderr), ("1\n2\n3\n", "E\n"))  # collected as well
        self.assertEqual(r.stdout_total_bytes, 6)
        self.assertFalse(r.stdout_truncated)
        # Streaming keeps the cap too: the tail of each stream.
        r = self.sb.run("seq 1 20000", on_output=lambda s, d: None, max_output_bytes=50)
        self.assertTrue(r.stdout_truncated)
        self.assertEqual(len(r.stdout_bytes), 50)
        self.assertTrue(r.stdout.endswith("19999\n20000\n"))
        # Above the daemon's maximum (64 MiB a stream): refused, nothing runs.
        with self.assertRaisesRegex(sbx.InvalidArgument, "nothing was run"):
            self.sb.run("touch /workspace/ran", max_output_bytes=(64 << 20) + 1)
        with self.assertRaises(sbx.NotFound):
            self.sb.stat("/workspace/ran")
        # Both streams full at the maximum: more than one frame, and it comes back.
        r = self.sb.run("head -c 70000000 /dev/zero | tr '\\0' o; "
                        "head -c 70000000 /dev/zero | tr '\\0' e >&2",
                        max_output_bytes=64 << 20)
        self.assertEqual((len(r.stdout_bytes), len(r.stderr_bytes)), (64 << 20, 64 << 20))
        self.assertEqual((r.stdout_total_bytes, r.stderr_total_bytes), (70000000, 70000000))
        self.assertTrue(r.stdout_truncated and r.stderr_truncated)
        self.assertEqual(r.stdout_bytes.strip(b"o") + r.stderr_bytes.strip(b"e"), b"")

    def test_callback_exception_is_raised_after_the_command(self) -> None:
        seen: List[bytes] = []

        def bad(stream: str, data: bytes) -> None:
            seen.append(data)
            raise KeyError("from the callback")

        with self.assertRaisesRegex(KeyError, "from the callback"):
            self.sb.run("echo a; sleep 0.1; echo b; touch /workspace/done", on_output=bad)
        self.assertEqual(len(seen), 1)  # not called again after it raised
        self.assertTrue(self.sb.exists("/workspace/done"))  # the command ran to its end
        self.assertEqual(self.sb.run("echo still usable").stdout, "still usable\n")

    def test_callback_may_not_reenter_its_client(self) -> None:
        with self.assertRaisesRegex(sbx.SbxError, "re-entrant"):
            self.sb.run("echo x", on_output=lambda s, d: self.sb.info())

    def test_history_and_cancel(self) -> None:
        self.sb.run("echo first")
        results: List[sbx.Result] = []
        runner = threading.Thread(target=lambda: results.append(self.sb.run("sleep 30", timeout=60)))
        t0 = time.monotonic()
        runner.start()
        with sbx.Client(self.daemon.sock) as other:
            sb2 = other.attach(self.sb.id)
            running = None
            while running is None and time.monotonic() - t0 < 10:
                running = next((h for h in sb2.history() if h.running), None)
                time.sleep(0.05)
            self.assertIsNotNone(running, "the command never showed as running")
            self.assertEqual(running.argv, ("/bin/sh", "-c", "sleep 30"))
            sb2.cancel(running.command_id)
            runner.join(10)
            self.assertFalse(runner.is_alive())
            self.assertLess(time.monotonic() - t0, 10)
            self.assertEqual(results[0].outcome, sbx.Outcome.CANCELLED)
            self.assertEqual(results[0].command_id, running.command_id)
            with self.assertRaises(sbx.NotFound):
                sb2.cancel(running.command_id)  # not running any more
            h = sb2.history()
            self.assertIsInstance(h, sbx.History)
            self.assertEqual([r.seq for r in h], list(range(1, len(h) + 1)))
            self.assertEqual(h[0].argv, ("/bin/sh", "-c", "echo first"))
            self.assertEqual(h[0].exit_code, 0)
            self.assertEqual(h[0].client_name, "test_sbx")
            self.assertEqual(h[0].caller_uid, os.getuid())
            page = sb2.history(limit=1)
            self.assertEqual(len(page), 1)
            self.assertTrue(page.truncated)
            rest = sb2.history(after_seq=page.next_after_seq)
            self.assertEqual([r.seq for r in rest], [r.seq for r in h[1:]])

    def test_started_id_signal_and_running(self) -> None:
        started: List[str] = []
        out: List[bytes] = []
        results: List[sbx.Result] = []
        ready = threading.Event()

        def on_output(stream: str, data: bytes) -> None:
            out.append(data)
            if b"ready" in b"".join(out):
                ready.set()

        def run() -> None:
            results.append(self.sb.run(
                "trap 'echo got INT; exit 3' INT; echo ready; while :; do sleep 0.05; done",
                on_started=started.append, on_output=on_output))

        runner = threading.Thread(target=run)
        runner.start()
        self.assertTrue(ready.wait(10), "the command did not start and print")
        self.assertEqual(len(started), 1)
        with sbx.Client(self.daemon.sock) as other:
            sb2 = other.attach(self.sb.id)
            rec = next(h for h in sb2.history() if h.command_id == started[0])
            self.assertEqual(rec.outcome, sbx.Outcome.RUNNING)
            self.assertTrue(rec.running)
            with self.assertRaisesRegex(sbx.InvalidArgument, "SIGINT"):
                sb2.signal(started[0], signal.SIGSTOP)
            sb2.signal(started[0], signal.SIGINT)
            runner.join(10)
            self.assertFalse(runner.is_alive())
        self.assertEqual(results[0].command_id, started[0])
        self.assertEqual(results[0].outcome, sbx.Outcome.EXITED)
        self.assertEqual(results[0].exit_code, 3)
        self.assertIn("got INT", results[0].stdout)
        # on_started alone: the output still comes back whole in the result.
        ids: List[str] = []
        r = self.sb.run("echo hi; echo err >&2", on_started=ids.append)
        self.assertEqual((r.stdout, r.stderr, ids), ("hi\n", "err\n", [r.command_id]))

        def boom(_cid: str) -> None:
            raise KeyError("from on_started")

        with self.assertRaisesRegex(KeyError, "from on_started"):
            self.sb.run("true", on_started=boom)

    def test_tty_repl_resize_and_history(self) -> None:
        r = self.sb.run("tty; stty size; test -t 0 -a -t 2 && echo ALL; echo e >&2",
                        tty=True, rows=30, cols=90)
        self.assertEqual((r.exit_code, r.stdout, r.stderr),
                         (0, "/dev/pts/0\r\n30 90\r\nALL\r\ne\r\n", ""))
        # A Python REPL on the terminal, typed into through a pipe as it prompts.
        rfd, wfd = os.pipe()
        self.addCleanup(os.close, rfd)
        out: List[bytes] = []
        started: List[str] = []
        results: List[sbx.Result] = []
        prompted = threading.Event()
        sized = threading.Event()

        def on_output(stream: str, data: bytes) -> None:
            self.assertEqual(stream, "stdout")
            out.append(data)
            text = b"".join(out)
            if b">>> " in text:
                prompted.set()
            if b"lines=50" in text:
                sized.set()

        def run() -> None:
            results.append(self.sb.run("exec python3 -q", tty=True, stdin=rfd,
                                       on_started=started.append, on_output=on_output))

        runner = threading.Thread(target=run)
        runner.start()
        try:
            self.assertTrue(prompted.wait(10), b"".join(out))
            os.write(wfd, b"print(6*7)\n")
            with sbx.Client(self.daemon.sock) as other:
                sb2 = other.attach(self.sb.id)
                sb2.resize(started[0], 50, 132)
                with self.assertRaises(sbx.InvalidArgument):
                    sb2.resize(started[0], 0, 80)
                os.write(wfd, b"import os; print(os.get_terminal_size())\n")
                self.assertTrue(sized.wait(10), b"".join(out))
                os.write(wfd, b"exit(7)\n")
        finally:
            os.close(wfd)
            runner.join(30)
        self.assertFalse(runner.is_alive())
        self.assertEqual(results[0].exit_code, 7)
        self.assertIn("\r\n42\r\n", results[0].stdout)
        self.assertIn("columns=132, lines=50", results[0].stdout)
        # Bad sizes, and a resize of a command without a terminal.
        with self.assertRaisesRegex(sbx.InvalidArgument, "rows and cols"):
            self.sb.run("true", tty=True, rows=5000)
        with self.assertRaisesRegex(sbx.InvalidArgument, "tty"):
            self.sb.run("true", rows=30, cols=90)
        with self.assertRaises(ValueError):
            self.sb.run("true", tty=True, cols=0)
        ids: List[str] = []
        done = threading.Event()

        def pipe_cmd() -> None:
            self.sb.run("sleep 2", on_started=ids.append)
            done.set()

        t = threading.Thread(target=pipe_cmd)
        t.start()
        deadline = time.monotonic() + 10
        while not ids and time.monotonic() < deadline:
            time.sleep(0.02)
        with sbx.Client(self.daemon.sock) as other:
            with self.assertRaisesRegex(sbx.FailedPrecondition, "no terminal"):
                other.attach(self.sb.id).resize(ids[0], 30, 90)
        t.join(10)
        recs = {h.command_id: h for h in self.sb.history()}
        self.assertTrue(recs[r.command_id].tty)
        self.assertTrue(recs[started[0]].tty)
        self.assertFalse(recs[ids[0]].tty)

    # -- files --

    def test_watch(self) -> None:
        """Sandbox.watch: a generator of coalesced changes, set up when it returns, that
        stops the watch when closed, and raises SandboxEnded when the sandbox ends."""
        watcher = sbx.Client(self.daemon.sock, client_name="test_sbx-watch")
        self.addCleanup(watcher.close)
        wsb = watcher.attach(self.sb.id)
        with self.assertRaises(sbx.NotFound):
            wsb.watch("/no/such/dir")
        self.sb.write_file("w/seed.txt", "x")
        with self.assertRaises(sbx.InvalidArgument):
            wsb.watch("w/seed.txt")
        with self.assertRaises(sbx.InvalidArgument):
            wsb.watch("w", coalesce_ms=5)
        gen = wsb.watch("/workspace/w", recursive=True, coalesce_ms=50)
        # While the watch holds it, the watcher's Client makes no other call.
        with self.assertRaises(sbx.FailedPrecondition):
            watcher.get(self.sb.id)
        self.sb.run("mkdir /workspace/w/d && echo a > /workspace/w/d/f && "
                    "echo b > /workspace/w/t && rm /workspace/w/t && "
                    "mv /workspace/w/seed.txt /workspace/w/moved.txt && touch /workspace/w/last")
        seen = []
        for ev in gen:
            self.assertNotEqual(ev.kind, sbx.FileEventKind.OVERFLOW, ev.reason)
            seen.append((str(ev.kind), ev.path, ev.old_path, ev.is_dir))
            if ev.path == "/workspace/w/last":
                break
        gen.close()
        self.assertIn(("created", "/workspace/w/d", None, True), seen)
        self.assertIn(("created", "/workspace/w/d/f", None, False), seen)
        self.assertIn(("renamed", "/workspace/w/moved.txt", "/workspace/w/seed.txt", False), seen)
        # Made and removed within one batch: coalesced away (or, split across two
        # batches, created then deleted: never left standing).
        t = [k for k, p, _, _ in seen if p == "/workspace/w/t"]
        self.assertIn(t, ([], ["created", "deleted"]))
        # Closed: the Client is free again.
        self.assertEqual(watcher.get(self.sb.id).state, sbx.State.READY)
        # The end of the sandbox ends a watch with SandboxEnded.
        gen = wsb.watch("/workspace")
        self.client.attach(self.sb.id).terminate()
        with self.assertRaises(sbx.SandboxEnded):
            for _ in gen:
                pass

    def test_files(self) -> None:
        sb = self.sb
        sb.write_file("a/b/c.txt", "héllo\n")  # parents created, relative to /workspace
        self.assertEqual(sb.read_file("/workspace/a/b/c.txt"), "héllo\n".encode())
        self.assertEqual(sb.read_text("a/b/c.txt"), "héllo\n")
        sb.write_file("a/b/c.txt", b"more\n", append=True)
        self.assertEqual(sb.read_file("a/b/c.txt"), "héllo\nmore\n".encode())
        sb.write_file("bin.dat", bytes(range(256)), mode=0o600)
        self.assertEqual(sb.read_file("bin.dat"), bytes(range(256)))
        self.assertEqual(sb.read_file("bin.dat", offset=250), bytes(range(250, 256)))
        self.assertEqual(sb.read_file("bin.dat", offset=10, limit=3), bytes([10, 11, 12]))
        ch = sb.read_chunk("bin.dat", 0, 100)
        self.assertEqual((len(ch.data), ch.size, ch.next_offset, ch.eof), (100, 256, 100, False))
        ch = sb.read_chunk("bin.dat", 200, 100)
        self.assertEqual((len(ch.data), ch.next_offset, ch.eof), (56, 256, True))
        st = sb.stat("bin.dat")
        self.assertEqual((st.name, st.type, st.size, st.mode & 0o777, st.is_dir),
                         ("bin.dat", sbx.FileType.REGULAR, 256, 0o600, False))
        self.assertAlmostEqual(st.mtime_unix_ms, time.time() * 1000, delta=60000)
        self.assertEqual(sb.stat("a").type, sbx.FileType.DIRECTORY)
        self.assertTrue(sb.stat("a").is_dir)
        sb.run("ln -s bin.dat link")
        st = sb.stat("link")  # follows the link, and names its target
        self.assertEqual((st.type, st.size, st.symlink_target), (sbx.FileType.REGULAR, 256, "bin.dat"))
        (entry,) = [e for e in sb.list_directory() if e.name == "link"]  # the link itself
        self.assertEqual((entry.type, entry.symlink_target), (sbx.FileType.SYMLINK, "bin.dat"))
        self.assertEqual(sb.run("stat -c %a /workspace/bin.dat").stdout, "600\n")
        with self.assertRaises(sbx.NotFound):
            sb.write_file("x/y.txt", "z", create_parents=False)
        sb.mkdir("m1")
        sb.mkdir("/workspace/m2/deep/er", parents=True, mode=0o700)
        self.assertEqual(sb.stat("m2/deep/er").mode & 0o777, 0o700)
        with self.assertRaises(sbx.AlreadyExists):
            sb.mkdir("m1")
        ls = sb.list_directory()
        self.assertIsInstance(ls, sbx.DirectoryListing)
        self.assertEqual([e.name for e in ls], sorted(["a", "bin.dat", "link", "m1", "m2"]))
        self.assertFalse(ls.truncated)
        self.assertEqual({e.name for e in ls if e.is_dir}, {"a", "m1", "m2"})
        cut = sb.list_directory("/workspace", limit=2)
        self.assertEqual(len(cut), 2)
        self.assertTrue(cut.truncated)
        self.assertTrue(sb.exists("m2/deep"))
        self.assertFalse(sb.exists("nope"))
        sb.remove("bin.dat")
        self.assertFalse(sb.exists("bin.dat"))
        sb.remove("m1")
        with self.assertRaises(sbx.FailedPrecondition):
            sb.remove("m2")
        sb.remove("m2", recursive=True)
        self.assertEqual([e.name for e in sb.list_directory()], ["a", "link"])

    def test_file_errors(self) -> None:
        sb = self.sb
        with self.assertRaisesRegex(sbx.NotFound, "not found") as cm:
            sb.read_file("/workspace/missing")
        self.assertEqual(cm.exception.errno, 0)
        with self.assertRaisesRegex(sbx.ReadOnly, "read-only") as cm:
            sb.write_file("/etc/sbx-test", "x")
        self.assertEqual(cm.exception.code, sbx.Code.READ_ONLY)
        sb.write_file("private", "x")
        sb.run("chmod 000 /workspace/private")
        with self.assertRaisesRegex(sbx.PermissionDenied, "may not read") as cm:
            sb.read_file("private")
        self.assertIsInstance(cm.exception, PermissionError)
        sb.run("head -c 6000000 /dev/zero > /workspace/big")
        with self.assertRaisesRegex(sbx.TooLarge, "page through it") as cm:
            sb.read_file("big")
        self.assertEqual(cm.exception.errno, 0)  # the daemon's answer
        self.assertEqual(len(sb.read_file("big", offset=5999000)), 1000)
        with self.assertRaises(sbx.InvalidArgument):
            sb.read_file("/workspace")  # a directory

    def test_sandbox_errors(self) -> None:
        with self.assertRaisesRegex(sbx.NotFound, "not found") as cm:
            self.client.attach("py-no-such-sandbox")
        self.assertEqual(cm.exception.code, sbx.Code.NOT_FOUND)
        with self.assertRaises(sbx.NotFound):
            self.client.get("py-no-such-sandbox")
        with self.assertRaisesRegex(sbx.AlreadyExists, "already used") as cm:
            self.client.create(id=self.sb.id)
        self.assertEqual(cm.exception.code, sbx.Code.ALREADY_EXISTS)
        with self.assertRaisesRegex(sbx.InvalidArgument, "invalid sandbox ID") as cm:
            self.client.create(id="bad id!")
        self.assertIsInstance(cm.exception, ValueError)
        with self.assertRaises(sbx.InvalidArgument):
            self.client.create(sbx.SandboxPolicy(writable_paths=("relative/path",)))

    # -- threads, asyncio, leaks --

    def test_one_client_serialises_threads(self) -> None:
        errors: List[BaseException] = []
        outs: List[str] = []

        def work(i: int) -> None:
            try:
                outs.append(self.sb.run(f"sleep 0.3; echo {i}").stdout)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        t0 = time.monotonic()
        ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        self.assertEqual(errors, [])
        self.assertEqual(sorted(outs), ["0\n", "1\n", "2\n"])
        self.assertGreaterEqual(time.monotonic() - t0, 0.85)  # one call at a time

    def test_clients_in_threads_run_in_parallel(self) -> None:
        def work(i: int) -> str:
            with sbx.Client(self.daemon.sock) as c:
                return c.attach(self.sb.id).run(f"sleep 0.5; echo {i}").stdout

        async def main() -> List[str]:
            return await asyncio.gather(*(asyncio.to_thread(work, i) for i in range(4)))

        t0 = time.monotonic()
        outs = asyncio.run(main())
        self.assertEqual(outs, ["0\n", "1\n", "2\n", "3\n"])
        self.assertLess(time.monotonic() - t0, 1.9)  # 4 x 0.5 s in parallel, not 2 s in a row

    def test_no_leak_in_1000_runs(self) -> None:
        sb = self.sb
        sb.write_file("f", b"y" * 16384)

        def round_(i: int) -> None:
            r = sb.run(["head", "-c", "16384", "/workspace/f"], max_output_bytes=1 << 20)
            assert len(r.stdout_bytes) == 16384
            if i % 10 == 0:
                sb.run("printf 1234", on_output=lambda s, d: None)
                sb.read_file("f")
                sb.stat("f")
                sb.list_directory("/")
                sb.info()
                sb.history(limit=5)
                self.client.list(limit=5)
                try:
                    sb.read_file("missing")
                except sbx.NotFound:
                    pass

        for i in range(100):  # warm up the allocator and caches
            round_(i)
        before = _rss_kib()
        for i in range(1000):
            round_(i)
        grown = _rss_kib() - before
        # Leaking the results alone would be 16 MiB and more.
        self.assertLess(grown, 4096, f"RSS grew by {grown} KiB over 1000 runs")


# ---- a daemon of its own: limits, a daemon that stops, one that hangs ----------------


class DaemonFailureTest(DaemonTest):
    daemon_flags = ("--max-sandboxes", "1", "--warm", "0", "--max-frame-bytes", "1048576")

    def test_1_resource_exhausted(self) -> None:
        with self.client.create() as sb:
            with self.assertRaisesRegex(sbx.ResourceExhausted, "max-sandboxes") as cm:
                self.client.create()
            self.assertEqual(cm.exception.code, sbx.Code.RESOURCE_EXHAUSTED)
            sb.run("true")

    def test_2_too_large_before_sending(self) -> None:
        with self.client.create() as sb:
            with self.assertRaisesRegex(sbx.TooLarge, "") as cm:
                sb.write_file("big", b"x" * (2 << 20))
            self.assertEqual(cm.exception.errno, errno.EMSGSIZE)
            sb.write_file("small", b"x" * 1000)  # the connection stays usable
            self.assertEqual(len(sb.read_file("small")), 1000)

    def test_3_call_timeout_then_reconnect(self) -> None:
        with sbx.Client(self.daemon.sock, call_timeout=0.3) as c:
            c.list()
            os.kill(self.daemon.proc.pid, signal.SIGSTOP)
            try:
                t0 = time.monotonic()
                with self.assertRaises(sbx.Unavailable) as cm:
                    c.list()
                self.assertLess(time.monotonic() - t0, 3)
            finally:
                os.kill(self.daemon.proc.pid, signal.SIGCONT)
            self.assertIs(type(cm.exception), sbx.Unavailable)
            self.assertEqual(cm.exception.errno, errno.ETIMEDOUT)
            self.assertIsInstance(c.list(), sbx.SandboxList)  # connects again by itself

    def test_4_daemon_gone_then_back(self) -> None:
        sb = self.client.create()
        self.assertEqual(self.daemon.stop(), 0)
        with self.assertRaises(sbx.Unavailable) as cm:
            sb.run("true")
        self.assertIs(type(cm.exception), sbx.Unavailable)
        self.assertNotEqual(cm.exception.errno, 0)
        self.daemon.start()  # same socket and records
        with self.assertRaises(sbx.SandboxEnded):  # ended with the daemon (shutdown)
            sb.run("true")
        self.assertEqual(self.client.get(sb.id).state, sbx.State.TERMINATED)
        with self.client.create() as sb2:  # the same Client, reconnected
            self.assertEqual(sb2.run("echo back").stdout, "back\n")


# ---- waiting for a slot, against a real daemon (docs/sandboxes.md, "Many agents") -----


class BackgroundTest(DaemonTest):
    """run(background=True) and the Command handle: E2B's commands.run(background=True)
    and connect(pid), against a real daemon."""

    def setUp(self) -> None:
        self.sb = self.client.create(id=self.uid("bg"), timeout=300)
        self.addCleanup(self.sb.terminate)

    def test_outlives_its_client_attach_wait_kill(self) -> None:
        t0 = time.monotonic()
        with sbx.Client(self.daemon.sock) as first:
            started = first.attach(self.sb.id).run(
                "i=0; while :; do echo $i; i=$((i+1)); sleep 0.1; done", background=True)
        self.assertLess(time.monotonic() - t0, 3)
        self.assertIsInstance(started, sbx.Command)
        self.assertTrue(started.command_id.startswith("c-"))
        self.assertFalse(started.queued)
        time.sleep(0.5)
        # Its first Client is gone: another one connects to it by ID.
        cmd = self.sb.command(started.command_id)
        now = cmd.output()
        self.assertEqual(now.outcome, sbx.Outcome.RUNNING)
        self.assertTrue(now.stdout.startswith("0\n1\n2\n"), now.stdout)
        info = self.sb.info()
        listed = [c for c in info.commands if c.command_id == cmd.command_id]
        self.assertEqual(len(listed), 1)
        self.assertEqual(listed[0].state, sbx.CommandState.RUNNING)
        self.assertTrue(listed[0].background)
        # wait with a timeout: still running, the kept output.
        r = cmd.wait(timeout=0.4)
        self.assertEqual(r.outcome, sbx.Outcome.RUNNING)
        # Follow with callbacks on one thread, kill from another Client.
        chunks: List[bytes] = []

        def kill_later() -> None:
            time.sleep(0.5)
            with sbx.Client(self.daemon.sock) as other:
                other.attach(self.sb.id).command(cmd.command_id).kill()

        killer = threading.Thread(target=kill_later)
        killer.start()
        r = cmd.attach(follow=True, on_stdout=chunks.append)
        killer.join()
        self.assertEqual(r.outcome, sbx.Outcome.CANCELLED)
        self.assertTrue(b"".join(chunks).startswith(b"0\n1\n2\n3\n"))
        self.assertEqual(r.stdout.encode(), b"".join(chunks))
        ended = [c for c in self.sb.info().commands if c.command_id == cmd.command_id]
        self.assertEqual(ended[0].state, sbx.CommandState.ENDED)
        self.assertEqual(ended[0].outcome, sbx.Outcome.CANCELLED)
        rec = next(h for h in self.sb.history() if h.command_id == cmd.command_id)
        self.assertTrue(rec.background)

    def test_stdin_timeout_and_start_failed(self) -> None:
        cmd = self.sb.run("cat; exit 4", background=True, stdin_open=True)
        cmd.send_stdin("hello ")
        cmd.send_stdin(b"world", eof=True)
        r = cmd.wait(timeout=10)
        self.assertEqual((r.outcome, r.exit_code, r.stdout), (sbx.Outcome.EXITED, 4, "hello world"))
        with self.assertRaises(sbx.NotFound):
            cmd.send_stdin("more")
        r = self.sb.run("sleep 30", background=True, timeout=0.3).wait(timeout=10)
        self.assertEqual(r.outcome, sbx.Outcome.TIMED_OUT)
        self.assertEqual(r.timeout, 0.3)
        # Without a timeout, none (not the 60 s of a command run() waits for); 0 too.
        for cmd in (self.sb.run("sleep 100", background=True),
                    self.sb.run("sleep 100", background=True, timeout=0)):
            now = cmd.output()
            self.assertEqual(now.outcome, sbx.Outcome.RUNNING)
            self.assertIsNone(now.timeout)
            cmd.kill()
        r = self.sb.run(["/no/such/program"], background=True).wait()
        self.assertEqual(r.outcome, sbx.Outcome.START_FAILED)
        with self.assertRaises(sbx.NotFound):
            self.sb.command("c-999").output()
        with self.assertRaises(ValueError):
            self.sb.run("true", background=True, on_output=lambda s, d: None)


class QueueTest(DaemonTest):
    """run(queue_timeout=, on_queued=) in a sandbox of one slot that a sleep holds."""

    def setUp(self) -> None:
        self.sb = self.client.create(id=self.uid("q"), timeout=300,
                                     limits=sbx.ResourceLimits(commands=1))
        self.addCleanup(self.sb.terminate)
        self.assertEqual(self.sb.info().policy.limits.commands, 1)
        # The holder: a sleep on a Client of its own, on another thread.
        self.holder_id: List[str] = []
        started = threading.Event()
        self.holder_client = sbx.Client(self.daemon.sock, client_name="holder")
        self.addCleanup(self.holder_client.close)
        holder = self.holder_client.attach(self.sb.id)

        def hold() -> None:
            holder.run("sleep 30", timeout=60,
                       on_started=lambda cid: (self.holder_id.append(cid), started.set()))

        t = threading.Thread(target=hold, daemon=True)
        t.start()
        self.addCleanup(t.join, 20)
        self.addCleanup(self.release)
        self.assertTrue(started.wait(10), "the holder did not start")

    def release(self) -> None:
        """Cancels the holder (on a Client of its own: this may run in a callback of
        self.client's run)."""
        if self.holder_id:
            with sbx.Client(self.daemon.sock) as c:
                try:
                    c.attach(self.sb.id).cancel(self.holder_id.pop())
                except sbx.NotFound:
                    pass

    def test_queue_timeout_never_runs(self) -> None:
        seen: List[Tuple[str, int]] = []
        t0 = time.monotonic()
        r = self.sb.run("touch /workspace/late", queue_timeout=0.3,
                        on_queued=lambda cid, ahead: seen.append((cid, ahead)),
                        on_started=lambda cid: self.fail("it started"))
        took = time.monotonic() - t0
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0][1], 0)
        self.assertEqual(seen[0][0], r.command_id)
        self.assertEqual(r.outcome, sbx.Outcome.QUEUE_TIMEOUT)
        self.assertGreaterEqual(r.queued_ms, 280)
        self.assertGreaterEqual(took, 0.28)
        self.assertLess(took, 5)
        self.assertIsNone(r.exit_code)
        self.assertFalse(r.succeeded)
        self.assertEqual(r.duration, 0)
        with self.assertRaisesRegex(sbx.CommandFailed, "never ran: no slot in sandbox"):
            r.check()
        # 0: no wait at all, refused at once.
        t0 = time.monotonic()
        with self.assertRaisesRegex(sbx.ResourceExhausted, "Limits.commands") as cm:
            self.sb.run("true", queue_timeout=0)
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual(cm.exception.code, sbx.Code.RESOURCE_EXHAUSTED)
        self.release()
        self.assertEqual(self.sb.run("test -e /workspace/late; echo $?").stdout, "1\n")

    def test_waits_then_runs_and_is_cancelled_while_waiting(self) -> None:
        # One that waits, then runs once the holder is cancelled from its on_queued.
        seen: List[Tuple[str, int]] = []

        def queued(cid: str, ahead: int) -> None:
            seen.append((cid, ahead))
            with sbx.Client(self.daemon.sock) as other:  # not the waiting Client
                self.assertEqual(other.get(self.sb.id).queued_commands, 1)
            time.sleep(0.1)
            self.release()

        r = self.sb.run("echo ran", queue_timeout=10, on_queued=queued)
        self.assertEqual(r.outcome, sbx.Outcome.EXITED)
        self.assertEqual(r.stdout, "ran\n")
        self.assertEqual(len(seen), 1)
        self.assertGreaterEqual(r.queued_ms, 90)
        self.assertLess(r.queued_ms, 5000)
        self.assertEqual(self.sb.info().queued_commands, 0)
        # A new holder, and one cancelled while it waits: CANCELLED, never ran.
        started = threading.Event()
        holder = self.holder_client.attach(self.sb.id)
        t = threading.Thread(target=lambda: holder.run(
            "sleep 30", on_started=lambda cid: (self.holder_id.append(cid), started.set())),
            daemon=True)
        t.start()
        self.addCleanup(t.join, 20)
        self.assertTrue(started.wait(10))

        def cancel_me(cid: str, ahead: int) -> None:
            with sbx.Client(self.daemon.sock) as other:
                other.attach(self.sb.id).cancel(cid)

        r = self.sb.run("touch /workspace/cancelled", queue_timeout=10, on_queued=cancel_me)
        self.assertEqual(r.outcome, sbx.Outcome.CANCELLED)
        self.assertEqual(r.duration, 0)
        self.release()
        self.assertEqual(self.sb.run("test -e /workspace/cancelled; echo $?").stdout, "1\n")


class ImagesTest(DaemonTest):
    """client.images and sandboxes from images (docs/images.md), with the test image of
    tests/mkimage.sh (busybox; User 1000:1000, WorkingDir /data) from its OCI layout."""

    daemon_flags = ("--warm", "0", "--spares", "0")

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="img.", dir=self.base)
        subprocess.run(["bash", os.path.join(ROOT, "tests", "mkimage.sh"), self.dir], check=True,
                       capture_output=True, cwd=self.dir)
        self.layout = os.path.join(self.dir, "oci")

    def test_pull_list_create_run_remove(self) -> None:
        seen: List[sbx.PullProgress] = []
        img = self.client.images.pull(f"oci:{self.layout}:img", on_progress=seen.append)
        self.assertTrue(img.digest.startswith("sha256:"))
        self.assertTrue(any(p.phase == "unpack" for p in seen), seen)
        self.assertIn(img.digest, [i.digest for i in self.client.images.list()])
        cfg = self.client.images.inspect(img.digest).config
        assert cfg is not None
        self.assertEqual((cfg.user, cfg.working_dir), ("1000:1000", "/data"))
        with self.client.create(image=img.digest) as sb:
            r = sb.run(["busybox", "id", "-u"])
            self.assertEqual(r.stdout, "1000\n")
            r = sb.run("echo hi > /etc/mine && busybox id -u", user="root")
            self.assertEqual((r.exit_code, r.stdout), (0, "0\n"))
            self.assertEqual(sb.info().image_digest, img.digest)
            with self.assertRaises(sbx.FailedPrecondition):
                self.client.images.remove(img.digest)
        self.assertEqual(self.client.images.remove(img.digest).names != (), True)
        with self.assertRaises(sbx.NotFound):
            self.client.images.inspect(img.digest)

    def test_a_callback_that_raises(self) -> None:
        def boom(_p: sbx.PullProgress) -> None:
            raise RuntimeError("boom")

        with self.assertRaisesRegex(RuntimeError, "boom"):
            self.client.images.pull(f"oci:{self.layout}:img", on_progress=boom)
        self.client.images.prune()

    def test_snapshot_and_fork(self) -> None:
        img = self.client.images.pull(f"oci:{self.layout}:img")
        with self.client.create(image=img.digest, labels={"t": "snap"}) as sb:
            sb.run("echo base > /workspace/f && echo root > /etc/r", user="root", check=True)
            snap = sb.snapshot("pysnap:v1")
            self.assertEqual(snap.names, ("docker.io/library/pysnap:v1",))
            labels = self.client.images.inspect("pysnap:v1").config.labels
            self.assertEqual(labels["io.sbxd.snapshot.sandbox"], sb.id)
            self.assertIn('"network":', labels["io.sbxd.snapshot.policy"])
            archive = os.path.join(self.dir, "pysnap.tar")
            self.assertEqual(self.client.images.export("pysnap:v1", archive).digest, snap.digest)
            import tarfile
            with tarfile.open(archive) as t:
                self.assertIn("index.json", t.getnames())
            with self.assertRaises(sbx.NotFound):
                self.client.images.export("no-such", archive + ".none")
            self.assertFalse(os.path.exists(archive + ".none"))
            with self.client.create(image="pysnap:v1") as again:
                self.assertEqual(again.run("busybox cat /workspace/f /etc/r").stdout,
                                 "base\nroot\n")
            forks = sb.fork(3)
            try:
                self.assertEqual(len(forks), 3)
                for i, f in enumerate(forks):
                    f.run(f"echo {i} > /workspace/me", check=True)
                for i, f in enumerate(forks):
                    self.assertEqual(f.run("busybox cat /workspace/f /workspace/me").stdout,
                                     f"base\n{i}\n")
                    self.assertEqual(f.info().labels, {"t": "snap"})
            finally:
                for f in forks:
                    f.terminate()
            with self.assertRaises(ValueError):
                sb.fork(0)
            # restore: the files back, the same sandbox.
            sb.run("busybox rm -rf /workspace/f /etc/r", user="root", check=True)
            info = sb.restore(snap)
            self.assertEqual(info.id, sb.id)
            self.assertEqual(info.labels, {"t": "snap"})
            self.assertEqual(sb.run("busybox cat /workspace/f /etc/r").stdout, "base\nroot\n")
            sb.run("busybox rm /workspace/f", check=True)
            sb.restore("pysnap:v1")
            self.assertEqual(sb.run("busybox cat /workspace/f").stdout, "base\n")
            with self.assertRaises(sbx.NotFound):
                sb.restore("no-such")
        with self.client.create() as host:
            with self.assertRaises(sbx.Unimplemented):
                host.snapshot()

    def test_fork_overrides(self) -> None:
        img = self.client.images.pull(f"oci:{self.layout}:img")
        limits = sbx.ResourceLimits(memory_bytes=256 << 20, processes=100)
        with self.client.create(image=img.digest, labels={"t": "pyfork", "run": "1"},
                                network=sbx.NetworkMode.FULL, limits=limits) as sb:
            forks = sb.fork(2, network=sbx.NetworkMode.NONE, labels={"run": "2"},
                            limits=sbx.ResourceLimits(memory_bytes=512 << 20))
            try:
                self.assertEqual(len(forks), 2)
                for f in forks:
                    info = f.info()
                    self.assertEqual(info.policy.limits.memory_bytes, 512 << 20)
                    self.assertEqual(info.policy.limits.processes, 100)
                    self.assertEqual(info.policy.network, sbx.NetworkMode.NONE)
                    self.assertEqual(info.labels, {"t": "pyfork", "run": "2"})
            finally:
                for f in forks:
                    f.terminate()
            info = sb.info()
            self.assertEqual((info.policy.limits.memory_bytes, info.policy.network),
                             (256 << 20, sbx.NetworkMode.FULL))
            # Bad values: refused, no fork made.
            with self.assertRaises(ValueError):
                sb.fork(idle_timeout=-1)
            with self.assertRaises(TypeError):
                sb.fork(writable="/tmp")
            with self.assertRaises(sbx.InvalidArgument):
                sb.fork(limits=sbx.ResourceLimits(processes=10**9))
            live = self.client.list(labels={"t": "pyfork"})
            self.assertEqual([s.id for s in live], [sb.id])


class PortTest(DaemonTest):
    """Sandbox.open_port and Sandbox.forward against a server in a sandbox."""

    def _serving(self) -> sbx.Sandbox:
        """A sandbox of its own whose /workspace is served by http.server on 8000."""
        sb = self.client.create(id=self.uid("port"), timeout=300)
        self.addCleanup(sb.terminate)
        sb.write_file("/workspace/hello.txt", b"hi there\n")
        sb.run("cd /workspace && exec python3 -m http.server 8000 --bind 127.0.0.1",
               background=True, timeout=300)
        for _ in range(300):
            try:
                sb.open_port(8000).close()
                return sb
            except sbx.Unavailable:
                time.sleep(0.1)
        self.fail("the server in the sandbox did not start")

    @staticmethod
    def _read_all(s: socket.socket) -> bytes:
        s.settimeout(20)
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                return out
            out += d

    def test_open_port(self) -> None:
        sb = self._serving()
        with sb.open_port(8000) as s:
            self.assertIsInstance(s, socket.socket)
            self.assertFalse(s.get_inheritable())
            s.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
            s.shutdown(socket.SHUT_WR)  # a half-close: the answer still comes
            data = self._read_all(s)
        self.assertTrue(data.startswith(b"HTTP/1.0 200"), data[:80])
        self.assertTrue(data.endswith(b"hi there\n"), data[-80:])
        # Its record: who, the port, the bytes each way, how it ended.
        for _ in range(100):
            fw = [r for r in sb.forwards() if r.port == 8000 and r.closed_unix_ms]
            if fw:
                break
            time.sleep(0.05)
        self.assertTrue(fw, list(sb.forwards()))
        self.assertIsInstance(fw[-1], sbx.ForwardRecord)
        self.assertEqual(fw[-1].caller_uid, os.getuid())
        self.assertEqual(fw[-1].bytes_in, len(b"GET /hello.txt HTTP/1.0\r\n\r\n"))
        self.assertEqual(fw[-1].bytes_out, len(data))
        self.assertEqual(fw[-1].reason, "closed")
        self.assertFalse(sb.forwards(after_seq=fw[-1].seq))
        for bad in (-1, 2**64):  # not wrapped to another page
            with self.assertRaisesRegex(ValueError, "after_seq"):
                sb.forwards(after_seq=bad)
        with self.assertRaisesRegex(ValueError, "limit"):
            sb.history(limit=2**32)
        with self.assertRaisesRegex(sbx.Unavailable, "port 9"):
            sb.open_port(9)
        with self.assertRaises(ValueError):
            sb.open_port(0)
        with self.assertRaises(TypeError):
            sb.open_port("8000")  # type: ignore[arg-type]
        with self.assertRaises(sbx.NotFound):
            self.client.attach(self.uid("nobody")).open_port(8000)

    def test_forward(self) -> None:
        sb = self._serving()
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with sb.forward(8000) as f:
            self.assertTrue(f.url.startswith("http://127.0.0.1:"), f.url)
            self.assertEqual(f.url, f"http://127.0.0.1:{f.port}/")
            self.assertEqual(opener.open(f.url + "hello.txt", timeout=20).read(), b"hi there\n")
            with concurrent.futures.ThreadPoolExecutor(10) as ex:
                bodies = list(ex.map(lambda _: opener.open(f.url + "hello.txt", timeout=20).read(),
                                     range(20)))
            self.assertEqual(bodies, [b"hi there\n"] * 20)
            port = f.port
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        with sb.forward(9) as f9:  # nothing listens: the connection is closed, and why kept
            with socket.create_connection(("127.0.0.1", f9.port), timeout=20) as c:
                self.assertEqual(self._read_all(c), b"")
            for _ in range(100):
                if f9.last_error:
                    break
                time.sleep(0.05)
            self.assertIn("port 9", f9.last_error or "")


if __name__ == "__main__":
    unittest.main()
