"""Socket options as the workload asks for them, and as the kernel really set them.

The kernel doubles SO_SNDBUF/SO_RCVBUF (man 7 socket) and clamps them to
net.core.wmem_max/rmem_max, so every value is read back with getsockopt.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

_CC_NAME_MAX = 16  # TCP_CA_NAME_MAX
#: What :meth:`SocketOptions.describe` reports, in order.
SOCKET_KEYS = ("sndbuf_requested", "sndbuf", "rcvbuf_requested", "rcvbuf", "cc", "nodelay",
               "local_port", "peer_port", "mss", "window_clamp")


@dataclass(frozen=True)
class SocketOptions:
    sndbuf: int | None = None
    rcvbuf: int | None = None
    nodelay: bool = False
    cc: str | None = None

    def apply(self, sock: socket.socket) -> None:
        """Set before connect/listen: the receive buffer fixes the window scale at the handshake."""
        if self.sndbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
        if self.rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(self.nodelay))
        if self.cc is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.cc.encode())

    def describe(self, sock: socket.socket) -> dict[str, Any]:
        """What was asked and what the kernel reports, for a connected socket."""
        cc = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, _CC_NAME_MAX)
        return {
            "sndbuf_requested": self.sndbuf,
            "sndbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            "rcvbuf_requested": self.rcvbuf,
            "rcvbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
            "cc": cc.split(b"\0", 1)[0].decode(),
            "nodelay": bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)),
            "local_port": sock.getsockname()[1],
            "peer_port": sock.getpeername()[1],
            "mss": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG),
            "window_clamp": None,  # read when the exchange has ended (:func:`ended`)
        }


def ended(sock: socket.socket, described: dict[str, Any]) -> dict[str, Any]:
    """``described`` with what only the end of the exchange shows: ``window_clamp``, the
    largest window the receiving side would offer (TCP_WINDOW_CLAMP). From Linux 6.6 on the
    kernel sets it to ``tcp_win_from_space(sk_rcvbuf)`` again when it learns the segments'
    ``scaling_ratio``, so with a fixed SO_RCVBUF it says which ratio the window was carved
    with, where no tracepoint can (a user namespace has no tracefs). None where the socket
    can no longer say (the connection was reset)."""
    try:
        clamp = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP)
    except OSError:
        clamp = None
    return {**described, "window_clamp": clamp}


def listener(address: str, port: int, options: SocketOptions, backlog: int = 16) -> socket.socket:
    """A listening socket whose accepted connections inherit ``options``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    options.apply(sock)
    sock.bind((address, port))
    sock.listen(backlog)
    return sock


def accept(server: socket.socket, options: SocketOptions) -> tuple[socket.socket, dict[str, Any]]:
    conn, _ = server.accept()
    options.apply(conn)  # the same values again: makes cc and nodelay explicit on this socket
    return conn, options.describe(conn)


def connect(address: str, port: int, options: SocketOptions) -> tuple[socket.socket, dict[str, Any]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    options.apply(sock)
    sock.connect((address, port))
    return sock, options.describe(sock)
