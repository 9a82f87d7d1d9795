"""A tiny socket transfer between client and server, for observer tests without workloads."""

from __future__ import annotations

import socket
import threading


def _listen(port: int) -> socket.socket:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    return srv


def _connect(address: str, port: int, rcvbuf: int | None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect((address, port))
    return sock


def transfer(path, port: int, size: int, *, rcvbuf: int | None = None) -> int:
    """Server sends ``size`` bytes to the client; returns the bytes received."""
    srv = path.server.call(_listen, port)
    try:
        cli = path.client.call(_connect, path.server.address, port, rcvbuf)
        conn, _ = srv.accept()
        got = [0]

        def read() -> None:
            while data := cli.recv(1 << 16):
                got[0] += len(data)

        reader = threading.Thread(target=read)
        reader.start()
        conn.sendall(b"x" * size)
        conn.close()
        reader.join(timeout=30)
        cli.close()
        return got[0]
    finally:
        srv.close()
