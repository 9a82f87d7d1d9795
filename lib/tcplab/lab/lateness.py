"""How late the delay line released packets, and snapshots of its counters on request.

The delay line process releases packets at due times and keeps a histogram of how late it was
(:class:`Lateness`). A run wants only its own share of it, so it asks for a snapshot before and
after itself: SIGUSR1 makes the process write its counters (with a sequence number) to its
stats file, and :func:`request_snapshot` waits for the new one. Both sides of that exchange
live here: the process's (:class:`Snapshots`, :func:`write_stats`, :func:`prepare_helper`) and
its controller's (:func:`request_snapshot`, :func:`stop_helper`).
"""

from __future__ import annotations

import bisect
import ctypes
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from ..files import write_atomically
from .state import die_with_parent

__all__ = ["LATE_EDGES_S", "Lateness", "Snapshots", "prepare_helper", "write_stats", "read_stats",
           "request_snapshot", "stop_helper"]

PR_SET_TIMERSLACK = 29

#: Upper edges (s) of the histogram's buckets; a last bucket holds anything later.
LATE_EDGES_S = (10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 20e-3, 50e-3, 100e-3)


def prepare_helper() -> None:
    """In a helper process that keeps time for a run: die with its parent, wake on time."""
    # If the experiment runner is killed with -9, this process must not outlive it.
    die_with_parent()
    libc = ctypes.CDLL(None, use_errno=True)
    # The default 50 µs timer slack would add straight to every due time.
    libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


class Lateness:
    """A histogram of lateness (s) over :data:`LATE_EDGES_S`, with its sum and worst."""

    def __init__(self) -> None:
        self.counts = [0] * (len(LATE_EDGES_S) + 1)
        self.count = 0
        self.total = 0.0
        self.worst = 0.0

    def add(self, late: float) -> None:
        self.counts[bisect.bisect_left(LATE_EDGES_S, late)] += 1
        self.count += 1
        self.total += late
        if late > self.worst:
            self.worst = late

    def to_dict(self) -> dict[str, Any]:
        return {"late_mean_s": self.total / self.count if self.count else 0.0, "late_total_s": self.total,
                "late_max_s": self.worst,
                "late_edges_s": list(LATE_EDGES_S), "late_hist": list(self.counts)}


class Snapshots:
    """In the helper process: SIGUSR1 asks for a snapshot. :meth:`fileno` becomes readable when
    one is asked for (select on it beside your own file descriptors); :meth:`wanted` says so and
    resets."""

    def __init__(self) -> None:
        self._asked: list[bool] = []
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)
        signal.signal(signal.SIGUSR1, lambda *_: self._asked.append(True))
        # A signal wakes a select through this pipe; select would otherwise sleep on.
        signal.set_wakeup_fd(self._write)
        self.taken = 0

    def fileno(self) -> int:
        return self._read

    def wanted(self) -> bool:
        while True:
            try:
                if not os.read(self._read, 512):
                    break
            except BlockingIOError:
                break
        if not self._asked:
            return False
        self._asked.clear()
        self.taken += 1
        return True

    def close(self) -> None:
        signal.set_wakeup_fd(-1)
        os.close(self._read)
        os.close(self._write)


def write_stats(path: str | None, stats: dict[str, Any]) -> None:
    """Replace the stats file at once (a reader never sees half of it)."""
    if path:
        write_atomically(path, json.dumps(stats))


def read_stats(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def request_snapshot(proc: subprocess.Popen | None, stats_file: Path, timeout: float = 2.0) -> dict[str, Any]:
    """The helper's counters now; {} when it is gone or does not answer within ``timeout``
    (a process starved of CPU): the caller then knows nothing."""
    if proc is None or proc.poll() is not None:
        return {}
    taken = read_stats(stats_file).get("snapshot", 0)
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = read_stats(stats_file)
        if stats.get("snapshot", 0) > taken:
            return stats
        time.sleep(0.005)
    return {}


def stop_helper(proc: subprocess.Popen | None, timeout: float = 5.0) -> None:
    """SIGTERM (it writes its last counters), then SIGKILL if it does not exit in ``timeout``."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
