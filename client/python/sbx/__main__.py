"""``python3 -m sbx``: the binding's version, and with ``--check`` the daemon's.

    python3 -m sbx --version        the binding's version and the libsbx it loads
    python3 -m sbx --check [SOCKET] connect, print what the daemon says, exit 0 if it answers
"""

from __future__ import annotations

import argparse
import sys

from . import Client, SbxError, __version__, default_socket_path, library_path
from ._lib import LibraryError, lib


def main(argv: "list[str] | None" = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m sbx", description="Python binding of sbxd.")
    ap.add_argument("--version", action="store_true", help="print versions and exit")
    ap.add_argument("--check", action="store_true", help="connect to the daemon and describe it")
    ap.add_argument("socket", nargs="?", help="the daemon's socket (default: libsbx's default)")
    args = ap.parse_args(argv)
    try:
        lib()
    except LibraryError as e:
        print(f"sbx: {e}", file=sys.stderr)
        return 1
    if args.check:
        try:
            with Client(args.socket) as c:
                h = c.hello()
        except SbxError as e:
            print(f"sbx: {e}", file=sys.stderr)
            return 1
        print(f"sbx {__version__} (libsbx {library_path()})")
        print(f"sbxd {h.daemon_version} at {c.socket}: protocol {h.protocol_version}, "
              f"cgroup {h.cgroup_version}, user namespaces {'yes' if h.user_namespaces else 'no'}, "
              f"seccomp {'yes' if h.seccomp else 'no'}, landlock ABI {h.landlock_abi}")
        return 0
    print(f"sbx {__version__} (libsbx {library_path()}; default socket {default_socket_path()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
