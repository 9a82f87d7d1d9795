"""A one-way stream (programs/stream.py) with a latency probe beside it: small UDP datagrams,
each echoed by the server, as the packets of a call.

Configuration: that of ``stream``, and ``probe``: ``port`` (the server's UDP port), ``size``
(bytes of each datagram), ``interval`` (seconds between two), ``lead`` (seconds of probes before
the stream starts). The client sends a datagram every interval, answered or not, numbered; the
server sends each one back as it came. The client records ``[sent, round trip]`` per probe in
its report's ``extra.probes`` (round trip None for one that never came back: UDP does not
resend, so a lost probe is a gap, never a late one). When the stream is done the client waits
for the probes still on their way, then tells the server to stop with :data:`END`.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

from . import harness, stream

#: A probe's number, at the head of its datagram.
SEQ = struct.Struct("!Q")
#: The number that tells the server the probe is over.
END = 2**64 - 1
#: How long the client waits for the last probes' answers once the stream is done.
GRACE_S = 0.5
#: How long the server waits, once its stream is done, for the client to end the probe.
SERVER_WAIT_S = 10.0


def _echo(sock: socket.socket) -> None:
    """The server's side: every datagram back to where it came from, until :data:`END`."""
    while True:
        data, peer = sock.recvfrom(65535)
        if len(data) >= SEQ.size and SEQ.unpack_from(data)[0] == END:
            return
        sock.sendto(data, peer)


def _send(sock: socket.socket, probe: dict[str, Any], stop: threading.Event, sent: list[tuple[float, float]],
          failed: list[BaseException]) -> None:
    """A datagram every ``interval``, on time whether or not the last one came back."""
    padding, due = bytes(max(0, probe["size"] - SEQ.size)), time.monotonic()
    try:
        while not stop.is_set():
            sent.append((time.time(), time.perf_counter()))
            try:
                sock.send(SEQ.pack(len(sent) - 1) + padding)
            except ConnectionRefusedError:  # an earlier datagram found no server: this one is lost
                pass
            due += probe["interval"]
            stop.wait(max(0.0, due - time.monotonic()))
    except BaseException as exc:  # reported by the main thread, which owns the report
        failed.append(exc)


def _receive(sock: socket.socket, sent: list[tuple[float, float]], answered: dict[int, float],
             stop: threading.Event) -> None:
    """Each answer's round trip, by its number; after ``stop``, until every probe is answered or
    :data:`GRACE_S` has passed."""
    deadline = None
    while True:
        if stop.is_set():
            deadline = deadline or time.monotonic() + GRACE_S
            if len(answered) >= len(sent) or time.monotonic() > deadline:
                return
        try:
            data = sock.recv(65535)
        except (socket.timeout, ConnectionRefusedError):  # nothing yet, or a probe found no server
            continue
        now = time.perf_counter()
        seq = SEQ.unpack_from(data)[0]
        if seq < len(sent) and seq not in answered:
            answered[seq] = now - sent[seq][1]


def run(config: dict[str, Any], report: harness.SideReport) -> None:
    probe = config["probe"]
    if config["role"] == "server":
        # Bound before the stream's port listens: the workload waits for that one only.
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((config["address"], probe["port"]))
        echo = threading.Thread(target=_echo, args=(sock,), name="probe", daemon=True)
        echo.start()
        try:
            stream.run(config, report)
            echo.join(SERVER_WAIT_S)  # until the client has its last answers and says so
        finally:
            sock.close()
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((config["address"], probe["port"]))
    sock.settimeout(0.05)
    stop, sent, answered, failed = threading.Event(), [], {}, []
    sender = threading.Thread(target=_send, args=(sock, probe, stop, sent, failed), name="probe")
    receiver = threading.Thread(target=_receive, args=(sock, sent, answered, stop), name="probe-answers")
    receiver.start()
    sender.start()
    try:
        stop.wait(probe["lead"])  # the probe alone: the path's round trip without the stream
        stream.run(config, report)
    finally:
        stop.set()
        sender.join()
        receiver.join()
        for _ in range(3):  # a datagram may be lost; the server also stops waiting by itself
            try:
                sock.send(SEQ.pack(END))
            except ConnectionRefusedError:
                pass
        sock.close()
        report.extra["probes"] = [[epoch, answered.get(seq)] for seq, (epoch, _) in enumerate(sent)]
    if failed:
        raise failed[0]


if __name__ == "__main__":
    harness.main(run)
