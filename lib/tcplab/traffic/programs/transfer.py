"""Moving bytes the way applications do: in writes of a given size, read at a given pace."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from .harness import SideReport


@dataclass(frozen=True)
class Pacing:
    """How the receiving application reads (``read_rate`` in bytes per second)."""

    read_size: int = 65536
    read_rate: float | None = None
    pause_after: int | None = None
    pause_for: float = 0.0


def write(sock: socket.socket, data: bytes | memoryview, report: SideReport) -> None:
    view = memoryview(data)
    report.about_to_write()
    while view:
        began = time.perf_counter()
        count = sock.send(view)
        report.wrote(count, time.perf_counter() - began)
        view = view[count:]


def _keep_pace(began: float, done: int, rate: float, now: float) -> None:
    """Sleep until ``done`` bytes are no more than ``rate`` (bytes per second) allows since
    ``began`` (both times on the clock that gave ``now``)."""
    delay = began + done / rate - now
    if delay > 0:
        time.sleep(delay)


def send(sock: socket.socket, size: int, write_size: int, report: SideReport, *,
         write_rate: float | None = None) -> None:
    """``size`` bytes of payload in application writes of ``write_size`` bytes; with
    ``write_rate`` (bytes per second), each write waits until the pace allows it, the way a
    producer hands data over as it makes it."""
    chunk = memoryview(bytes(write_size))
    left = size
    began = time.monotonic()
    while left > 0:
        piece = min(write_size, left)
        if write_rate:
            _keep_pace(began, size - left, write_rate, time.monotonic())
        write(sock, chunk[:piece], report)
        left -= piece


def receive(sock: socket.socket, pacing: Pacing, report: SideReport, limit: int | None = None) -> int:
    """Read until EOF (or ``limit`` bytes), pacing like the application would; bytes read."""
    buffer = memoryview(bytearray(pacing.read_size))
    got = 0
    began: float | None = None
    paused = False
    while limit is None or got < limit:
        want = pacing.read_size if limit is None else min(pacing.read_size, limit - got)
        count = sock.recv_into(buffer[:want])
        if count == 0:
            break
        now = time.time()
        report.read(count, now)
        got += count
        began = now if began is None else began
        if pacing.pause_after is not None and not paused and got >= pacing.pause_after:
            paused = True
            stopped = time.time()
            time.sleep(pacing.pause_for)
            report.extra.setdefault("pauses", []).append([stopped, time.time()])  # when reading stopped, resumed
            began += pacing.pause_for  # the rate applies to reading time, not to the pause
        if pacing.read_rate:
            _keep_pace(began, got, pacing.read_rate, time.time())
    return got


def receive_exactly(sock: socket.socket, size: int, pacing: Pacing, report: SideReport,
                    *, eof_ok: bool = False) -> int:
    """``size`` bytes; with ``eof_ok``, 0 when the peer closed cleanly before the first byte."""
    got = receive(sock, pacing, report, limit=size)
    if got < size and not (eof_ok and got == 0):
        raise ConnectionError(f"peer closed after {got} of {size} bytes")
    return got
