"""One-way streams: one side writes ``size`` bytes per connection, the other reads them.

Configuration: ``role`` (server or client), ``address``, ``port``, ``connections`` (made one
after the other), ``socket`` (:class:`SocketOptions`), ``reset_ok`` (a connection that dies is
recorded under ``died``, not raised), and either ``send``
(``size``, ``write_size``, ``write_rate`` in bytes per second) or ``receive`` (:class:`Pacing`). The writer half-closes when done
and waits for the reader to close, so both ends see the whole transfer.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
import time
from typing import Any

from . import harness, sockets
from .transfer import Pacing, receive, send


#: How a connection dies: a reset from the peer, or this side's kernel giving up on it.
DEATHS = (ConnectionResetError, TimeoutError, BrokenPipeError)


def _exchange(conn: socket.socket, config: dict[str, Any], report: harness.SideReport) -> None:
    try:
        _move(conn, config, report)
    except DEATHS as exc:
        if not config.get("reset_ok"):
            raise
        report.extra["died"] = {"at": time.time(), "error": f"{type(exc).__name__}: {exc}"}


def _move(conn: socket.socket, config: dict[str, Any], report: harness.SideReport) -> None:
    if config.get("send"):
        send(conn, config["send"]["size"], config["send"]["write_size"], report,
             write_rate=config["send"].get("write_rate"))
        conn.shutdown(socket.SHUT_WR)
        receive(conn, Pacing(), report)  # until the reader closes
    elif config.get("silent_after"):
        pacing = Pacing(**config["receive"])
        receive(conn, pacing, report, limit=config["silent_after"])
        _silent(conn, pacing.pause_for, report)
    else:
        receive(conn, Pacing(**config["receive"]), report)


#: iptables front ends, in the order the lab tries them (tcplab.lab.netns.IPTABLES).
IPTABLES = ("iptables", "iptables-legacy")
SILENCE = (["INPUT", "-j", "DROP"], ["OUTPUT", "-j", "DROP"])


def _iptables(*args: str) -> None:
    for binary in IPTABLES:
        done = subprocess.run([binary, "-w", *args], capture_output=True, text=True)
        if done.returncode == 0:
            return
    raise RuntimeError(f"iptables {' '.join(args)}: {done.stderr.strip()}")


def _silent(conn: socket.socket, seconds: float, report: harness.SideReport) -> None:
    """This host stops answering (every packet in and out dropped in its namespace, as a host
    that hung) for ``seconds``; then the connection is dropped without a word (a reset with
    SO_LINGER 0, itself dropped) and the host answers again, so nothing of this connection
    leaves it after the silence began. The reader goes on reading until the silence is in
    place (an iptables run takes a while, in UML hundreds of ms): its window must not close
    first, or the sender would probe a closed window instead of resending into silence."""
    began = time.time()
    stop = threading.Event()

    def drain() -> None:
        conn.settimeout(0.02)
        while not stop.is_set():
            try:
                if not conn.recv(1 << 16):
                    return
            except (TimeoutError, BlockingIOError):
                continue

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        for rule in SILENCE:
            _iptables("-I", rule[0], "1", *rule[1:])
    finally:
        stop.set()
        reader.join()
    try:
        time.sleep(seconds)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
    finally:
        for rule in SILENCE:
            _iptables("-D", *rule)
    report.extra["silent"] = [began, time.time()]


def run(config: dict[str, Any], report: harness.SideReport) -> None:
    options = sockets.SocketOptions(**config["socket"])
    server = None
    if config["role"] == "server":
        server = sockets.listener(config["address"], config["port"], options)
    try:
        for _ in range(config["connections"]):
            began, moved = time.time(), report.sent + report.received
            if server is not None:
                conn, report.socket = sockets.accept(server, options)
            else:
                conn, report.socket = sockets.connect(config["address"], config["port"], options)
            with conn:
                _exchange(conn, config, report)
                report.socket = sockets.ended(conn, report.socket)
            ended = time.time()
            report.requests.append({"start": began, "end": ended, "latency": ended - began,
                                    "bytes": report.sent + report.received - moved,
                                    "local_port": report.socket["local_port"]})
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    harness.main(run)
