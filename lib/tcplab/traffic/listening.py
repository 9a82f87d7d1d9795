"""Wait until the server process really listens: ask the kernel (sock_diag), never sleep and hope.

The listening socket must belong to the process just started: another program already
listening on the port would otherwise pass for it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from typing import Any

_LISTEN = 10  # TCP_LISTEN in the kernel's state numbering
POLL = 0.01


def _listening_inodes(port: int) -> set[int]:
    """Inodes of the TCP sockets listening on ``port`` in the calling thread's network namespace."""
    from pyroute2 import DiagSocket

    with DiagSocket() as diag:
        diag.bind()
        found = set()
        for family in (socket.AF_INET, socket.AF_INET6):
            found |= {entry["idiag_inode"] for entry in diag.get_sock_stats(family=family, states=1 << _LISTEN)
                      if entry["idiag_sport"] == port}
        return found


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def wait_listening(host: Any, port: int, process: subprocess.Popen, deadline: float) -> bool:
    """True once ``process`` listens on ``port`` in ``host``'s namespace; False if it exits
    first or the monotonic ``deadline`` passes."""
    while time.monotonic() < deadline:
        listening = host.call(_listening_inodes, port)
        if listening & _socket_inodes(process.pid):
            return True
        if process.poll() is not None:
            return False
        time.sleep(POLL)
    return False
