"""Real TCP traffic for the capture tests, run inside a network namespace:

    python live_traffic.py SCENARIO ADDRESS PORT

bulk       the client sends 10 MB, the server (64 KB receive buffer) reads as fast as it can
zerowin    the server's receive buffer is tiny and it stops reading for a while
keepalive  a mostly idle connection with 1-second keep-alives

Client and server are threads of this one process, so there is a single process to
start and to stop.
"""

from __future__ import annotations

import socket
import sys
import threading
import time


def serve(listener: socket.socket, scenario: str, done: threading.Event) -> None:
    conn, _ = listener.accept()
    with conn:
        if scenario == "zerowin":
            time.sleep(1.5)  # the window fills and stays shut: zero windows and probes
            for _ in range(40):
                conn.recv(512)
                time.sleep(0.02)
        while conn.recv(1 << 16):
            pass
    done.set()


def main() -> int:
    scenario, address, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if scenario == "zerowin":
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    elif scenario == "bulk":
        # A fixed buffer: the advertised window stops growing within a few round trips.
        # Wireshark counts an ACK as a duplicate only if the window is unchanged, and with
        # autotuning the window grew on every ACK of some 3 MB runs (none was flagged).
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    listener.bind((address, port))
    listener.listen(1)
    done = threading.Event()
    server = threading.Thread(target=serve, args=(listener, scenario, done), daemon=True)
    server.start()

    client = socket.socket(family, socket.SOCK_STREAM)
    if scenario == "keepalive":
        client.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 5)
    client.connect((address, port))
    if scenario == "keepalive":
        client.sendall(b"hello")
        time.sleep(3.6)
    else:
        # bulk: 10 MB leaves enough in-order stretches between the test's losses for over 200
        # RTT samples, even over IPv6, where the snaplen cuts the SACK ACKs' analysis (60 runs).
        size = 300_000 if scenario == "zerowin" else 10_000_000
        chunk = b"x" * 65536
        sent = 0
        while sent < size:
            sent += client.send(chunk[: size - sent])
    client.shutdown(socket.SHUT_WR)
    done.wait(30)
    client.close()
    listener.close()
    return 0 if done.is_set() else 1


if __name__ == "__main__":
    sys.exit(main())
