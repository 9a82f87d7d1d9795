"""Request/response on one kept-alive connection.

Each request is a 16-byte header (body length, response length) and a body, written in one
write or, with ``split``, in two (header, then body: the "HTTP POST with Expect" pattern that
meets Nagle's algorithm and delayed ACKs). The server answers once the whole request is in.
The client waits ``idle`` seconds between requests (bursts after idle).

Configuration: ``role``, ``address``, ``port``, ``socket`` (:class:`SocketOptions`), and for
the client ``requests``, ``request_size``, ``response_size``, ``split``, ``idle``; for the
server ``write_size``.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from . import harness, sockets
from .transfer import Pacing, receive, receive_exactly, send, write

HEADER = struct.Struct("!QQ")


def client(config: dict[str, Any], report: harness.SideReport) -> None:
    options = sockets.SocketOptions(**config["socket"])
    conn, report.socket = sockets.connect(config["address"], config["port"], options)
    header = HEADER.pack(config["request_size"], config["response_size"])
    body = bytes(config["request_size"])
    with conn:
        for number in range(config["requests"]):
            if number and config["idle"]:
                time.sleep(config["idle"])
            began = time.time()
            if config["split"]:
                write(conn, header, report)
                write(conn, body, report)
            else:
                write(conn, header + body, report)
            got = receive_exactly(conn, config["response_size"], Pacing(), report)
            ended = time.time()
            report.requests.append({"start": began, "end": ended, "latency": ended - began, "bytes": got})
        conn.shutdown(socket.SHUT_WR)
        receive(conn, Pacing(), report)


def _read_header(conn: socket.socket) -> tuple[int, int] | None:
    """The next request's (body size, response size); None when the client has closed."""
    header = bytearray()
    while len(header) < HEADER.size:
        chunk = conn.recv(HEADER.size - len(header))
        if not chunk:
            if header:
                raise ConnectionError(f"peer closed inside a request header ({len(header)} bytes)")
            return None
        header += chunk
    return HEADER.unpack(header)


def server(config: dict[str, Any], report: harness.SideReport) -> None:
    options = sockets.SocketOptions(**config["socket"])
    with sockets.listener(config["address"], config["port"], options) as listening:
        conn, report.socket = sockets.accept(listening, options)
    with conn:
        while (sizes := _read_header(conn)) is not None:
            body_size, response_size = sizes
            receive_exactly(conn, body_size, Pacing(), report)
            send(conn, response_size, config["write_size"], report)


def run(config: dict[str, Any], report: harness.SideReport) -> None:
    (server if config["role"] == "server" else client)(config, report)


if __name__ == "__main__":
    harness.main(run)
