"""Does the path do what it was told? TCP-level round-trip time and goodput, measured.

ping is not enough with the delay line: its receive timestamp is taken when the kernel
first sees the packet, which for a forwarded packet can be before the router held it. So
the round trip is measured the way TCP sees it: a 1-byte ping-pong on a TCP_NODELAY
connection, timed by the application, and the kernel's own min_rtt from TCP_INFO.

Sockets are created inside the namespaces (see :meth:`Host.call`) and then used from
this process, so a probe needs no helper programs.
"""

from __future__ import annotations

import fcntl
import socket
import statistics
import struct
import termios
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .path import NetPath

PROBE_PORT = 5299


def _listen(port: int) -> socket.socket:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    return srv


def _connect(address: str, port: int, cc: str | None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if cc:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    sock.settimeout(10)
    sock.connect((address, port))
    return sock


def _min_rtt(sock: socket.socket) -> float:
    """tcpi_min_rtt (µs) from struct tcp_info (include/uapi/linux/tcp.h, since Linux 4.10)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    # 8 bytes of u8 fields, 24 u32 (rto … total_retrans), 4 u64 rates/counters, then
    # segs_out, segs_in, notsent_bytes, min_rtt: min_rtt sits at byte 148.
    return struct.unpack_from("I", info, 148)[0] / 1e6


@dataclass
class RttResult:
    samples: list[float]
    kernel_min_rtt: float

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def minimum(self) -> float:
        return min(self.samples)


def tcp_rtt(path: NetPath, count: int = 50, interval: float = 0.01, *, loopback: bool = False) -> RttResult:
    """Round trips of a 1-byte TCP ping-pong from client to server; with ``loopback``, from the
    client to itself (127.0.0.1 in its namespace): no path at all, only what the lab kernel's
    own socket calls and wake-ups add to every round trip an application sees (on the host
    about 0.1 ms, in UML about 0.3 ms: its system calls go through ptrace)."""
    echo_host = path.client if loopback else path.server
    srv = echo_host.call(_listen, PROBE_PORT)
    try:
        cli = path.client.call(_connect, "127.0.0.1" if loopback else path.server.address, PROBE_PORT, None)
        conn, _ = srv.accept()
        for s in (cli, conn):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.settimeout(10)

        def echo() -> None:
            while data := conn.recv(1):
                conn.sendall(data)

        echoer = threading.Thread(target=echo, daemon=True)
        echoer.start()
        # Warm-up: the first exchange also pays for the handshake's route/neighbour lookups.
        cli.sendall(b"w")
        cli.recv(1)
        samples = []
        for _ in range(count):
            t0 = time.perf_counter()
            cli.sendall(b"p")
            cli.recv(1)
            samples.append(time.perf_counter() - t0)
            time.sleep(interval)
        kernel_min = _min_rtt(cli)
        cli.close()
        echoer.join(timeout=5)
        conn.close()
    finally:
        srv.close()
    return RttResult(samples, kernel_min)


@dataclass
class GoodputResult:
    bytes: int
    seconds: float
    cc: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def bits_per_second(self) -> float:
        return self.bytes * 8 / self.seconds


def goodput(path: NetPath, seconds: float = 3.0, *, cc: str = "cubic", skip: float = 1.0) -> GoodputResult:
    """Bulk server → client transfer with autotuned buffers; goodput after a ``skip`` warm-up.

    The first second is left out so slow start does not count against the path.
    """
    srv = path.server.call(_listen, PROBE_PORT)
    chunk = b"\0" * 65536
    stop = threading.Event()
    try:
        cli = path.client.call(_connect, path.server.address, PROBE_PORT, None)
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        used_cc = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()

        def send() -> None:
            try:
                while not stop.is_set():
                    conn.sendall(chunk)
            except OSError:
                pass

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        read = 0
        t_start = time.perf_counter()
        first = last = None
        while last is None:
            read += len(cli.recv(1 << 20))
            now = time.perf_counter()
            if first is None:
                if now - t_start >= skip:
                    first = _arrived(cli, read)
            elif now - first[2] >= seconds:
                last = _arrived(cli, read)
        stop.set()
        cli.close()
        conn.close()
        sender.join(timeout=5)
    finally:
        srv.close()
    # From before the first reading to after the last: the widest span the two readings allow,
    # so a reader the machine kept waiting between its clock and its count reads the rate low,
    # never above the line.
    return GoodputResult(last[1] - first[1], last[2] - first[0], used_cc)


def _arrived(sock: socket.socket, read: int) -> tuple[float, int, float]:
    """(a clock reading, the bytes that have arrived on ``sock`` by then, a clock reading after).
    Arrived, not read: the ``read`` bytes the application took plus those still queued
    (FIONREAD, the kernel's SIOCINQ). Counting reads instead counted the bytes that reached a
    reader's queue while the machine kept it from its first clock reading as if they came after
    it: one way a class of eight learners on two cores read 95.66 Mbit/s on a 95.64 Mbit/s line."""
    before = time.perf_counter()
    queued = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]
    return before, read + queued, time.perf_counter()


def loss_share(path: NetPath, count: int = 400, interval: float = 0.002) -> float | None:
    """Share of ping round trips lost (two chances to be dropped: request and reply)."""
    result = path.client.run(["ping", "-c", str(count), "-i", str(interval), "-q", "-W", "1",
                              path.server.address], check=False, timeout=count * interval + 30)
    for line in result.stdout.splitlines():
        if "packet loss" in line:
            return float(line.split("%")[0].split()[-1]) / 100
    return None


def path_check(path: NetPath, *, rtt_count: int = 40, seconds: float = 3.0) -> tuple[list[dict[str, Any]], list[float]]:
    """Configured vs measured (one row per quantity) and the RTT samples, for the path check.
    The third row is the same ping-pong over loopback in the client's namespace: what the lab
    kernel itself adds to the application's round trip, which the TCP median includes.

    The goodput's "configured" value is the most TCP can carry at that line rate:
    1448 bytes of payload per 1514-byte frame.
    """
    spec = path.spec
    rtt = tcp_rtt(path, count=rtt_count)
    kernel_share = tcp_rtt(path, count=rtt_count, loopback=True)
    rows: list[dict[str, Any]] = [
        {"quantity": "round-trip time (TCP, median)", "unit": "ms",
         "configured": (spec.rtt if spec.rtt is not None else 2 * spec.one_way_delay) * 1e3,
         "measured": rtt.median * 1e3},
        {"quantity": "round-trip time (kernel min_rtt)", "unit": "ms",
         "configured": (spec.rtt if spec.rtt is not None else 2 * spec.one_way_delay) * 1e3,
         "measured": rtt.kernel_min_rtt * 1e3},
        # no configured value: the lab kernel's own share of the TCP median, not the path's
        {"quantity": "round-trip time (TCP over loopback, median)", "unit": "ms", "configured": None,
         "measured": kernel_share.median * 1e3},
    ]
    if spec.rate:
        put = goodput(path, seconds=seconds, skip=max(1.0, 30 * (spec.rtt or 0)))
        rows.append({"quantity": f"goodput ({put.cc}, autotuned buffers)", "unit": "Mbit/s",
                     "configured": spec.rate / 1e6 * 1448 / 1514, "measured": put.bits_per_second / 1e6})
    if spec.loss:
        share = loss_share(path)
        p = spec.loss / 100
        rows.append({"quantity": "ping loss (request or reply dropped)", "unit": "%",
                     "configured": (1 - (1 - p) ** 2) * 100,
                     "measured": None if share is None else share * 100})
    return rows, rtt.samples
