"""tcpdump in a namespace: headers only, confirmed listening before traffic, bounded, flushed.

``Capture`` starts one tcpdump per capture point and returns only once each has printed
"listening on" (the filter is attached then), so the first SYN is never missed; stopping
sends SIGINT, which makes tcpdump flush its file and print its counters, kept as
:class:`CaptureStats` (kernel drops included).
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

__all__ = ["CAPTURE_POINTS", "CaptureError", "CapturePoint", "CaptureStats", "Capture", "points_for"]

#: Where a run can be captured; "sender"/"receiver" follow the workload's direction.
CAPTURE_POINTS = ("sender", "receiver", "both", "router")
#: Bytes a pcap record costs beyond the snapshot: the 16-byte record header.
RECORD_OVERHEAD = 16
_STAT = re.compile(r"(\d+) packets? (captured|received by filter|dropped by kernel)")


class CaptureError(RuntimeError):
    """tcpdump did not start listening; carries what it printed."""


@dataclass(frozen=True)
class CapturePoint:
    """One interface in one namespace, and the file name its pcap gets."""

    host: Any  # tcplab.lab.path.Host
    ifname: str

    @property
    def label(self) -> str:
        return f"{self.host.name}-{self.ifname}"


def points_for(path: Any, where: str, sender: str) -> list[CapturePoint]:
    """Capture points of ``path`` for ``where`` (see :data:`CAPTURE_POINTS`); the main one first."""
    hosts = {"server": path.server, "client": path.client}
    receiver = "client" if sender == "server" else "server"
    if where == "sender":
        return [CapturePoint(hosts[sender], hosts[sender].ifname)]
    if where == "receiver":
        return [CapturePoint(hosts[receiver], hosts[receiver].ifname)]
    if where == "both":
        return [CapturePoint(hosts[sender], hosts[sender].ifname),
                CapturePoint(hosts[receiver], hosts[receiver].ifname)]
    if where == "router":
        # The router's side toward the sender first: what the bottleneck receives.
        order = ("to-server", "to-client") if sender == "server" else ("to-client", "to-server")
        return [CapturePoint(path.router, ifname) for ifname in order]
    raise ValueError(f"unknown capture point {where!r}; one of {CAPTURE_POINTS}")


@dataclass
class CaptureStats:
    label: str
    file: str
    captured: int | None = None
    received_by_filter: int | None = None
    dropped_by_kernel: int | None = None
    packet_limit: int = 0
    limit_hit: bool = False
    bytes: int = 0
    exit_code: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Running:
    point: CapturePoint
    file: Path
    process: subprocess.Popen
    stderr: list[str] = field(default_factory=list)
    listening: bool = False
    #: Set when tcpdump said "listening on", or when its stderr ended (it is gone).
    settled: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None


class Capture:
    """tcpdump at each of ``points``, writing ``<outdir>/<label>.pcap``.

    ``max_bytes`` bounds each file: tcpdump stops after as many packets as fit
    (``-c``), and the stats say when that limit was reached.
    """

    def __init__(self, points: Sequence[CapturePoint], outdir: Path, port: int, *,
                 snaplen: int = 128, max_bytes: int = 256 * 1024**2, start_timeout: float = 10.0) -> None:
        self.points = list(points)
        self.outdir = Path(outdir)
        self.port = port
        self.snaplen = snaplen
        self.packet_limit = max(1, max_bytes // (snaplen + RECORD_OVERHEAD))
        self.start_timeout = start_timeout
        self.stats: list[CaptureStats] = []
        #: What each tcpdump printed (its banner and final counters), for the run's logs.
        self.logs: dict[str, list[str]] = {}
        self._running: list[_Running] = []

    def __enter__(self) -> "Capture":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def files(self) -> list[Path]:
        return [self.outdir / f"{p.label}.pcap" for p in self.points]

    def argv(self, point: CapturePoint) -> list[str]:
        # --immediate-mode: with TPACKET_V3, packets wait in a ring block until it fills or
        # a 1 s timeout passes, and SIGINT loses a block not yet handed over.
        # -w -: the pcap goes to stdout, into a file this process opened. Writing it itself,
        # tcpdump as root chowns the file to the user it drops to, which fails where root
        # is not the file's real owner (the UML kernel run by an unprivileged user: hostfs).
        return ["tcpdump", "-i", point.ifname, "-n", "-U", "--immediate-mode", "-s", str(self.snaplen),
                "-c", str(self.packet_limit), "-w", "-", "tcp", "port", str(self.port)]

    def start(self) -> "Capture":
        self.outdir.mkdir(parents=True, exist_ok=True)
        try:
            for point, file in zip(self.points, self.files):
                self._running.append(self._launch(point, file))
            for running in self._running:
                self._await_listening(running)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, point: CapturePoint, file: Path) -> _Running:
        with open(file, "wb") as out:
            process = point.host.popen(self.argv(point), stdout=out,
                                       stderr=subprocess.PIPE, text=True, bufsize=1)
        running = _Running(point, file, process)
        running.reader = threading.Thread(target=self._read_stderr, args=(running,),
                                          name=f"tcpdump-{point.label}", daemon=True)
        running.reader.start()
        return running

    @staticmethod
    def _read_stderr(running: _Running) -> None:
        for line in running.process.stderr:
            running.stderr.append(line.rstrip("\n"))
            if "listening on" in line:
                running.listening = True
                running.settled.set()
        running.settled.set()

    def _await_listening(self, running: _Running) -> None:
        running.settled.wait(self.start_timeout)
        if not running.listening or running.process.poll() is not None:
            text = "; ".join(running.stderr) or "no output"
            raise CaptureError(f"tcpdump on {running.point.label} did not start listening: {text}")

    #: How long the files must stop growing before tcpdump is stopped, and the most to wait.
    DRAIN_QUIET_S, DRAIN_LIMIT_S = 0.25, 5.0

    def _drain(self) -> None:
        """Wait until every capture file stopped growing. SIGINT ends tcpdump at once, and a
        packet the kernel already queued for it but it had not yet read is then lost without
        being counted as dropped (in the UML kernel, where tcpdump shares one CPU with the
        transfer, 50 kB of a 300 kB transfer's tail were lost that way)."""
        deadline = time.monotonic() + self.DRAIN_LIMIT_S
        sizes, quiet_since = None, time.monotonic()
        while time.monotonic() < deadline and any(r.process.poll() is None for r in self._running):
            now = [r.file.stat().st_size if r.file.exists() else 0 for r in self._running]
            if now != sizes:
                sizes, quiet_since = now, time.monotonic()
            elif time.monotonic() - quiet_since >= self.DRAIN_QUIET_S:
                return
            time.sleep(0.02)

    def stop(self) -> list[CaptureStats]:
        """Let every tcpdump catch up, SIGINT it, wait for it to flush, collect its counters."""
        self._drain()
        for running in self._running:
            if running.process.poll() is None:
                running.process.send_signal(signal.SIGINT)
        for running in self._running:
            try:
                running.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                running.process.kill()
                running.process.wait()
            if running.reader is not None:
                running.reader.join(timeout=5)
            running.process.stderr.close()
            self.logs[running.point.label] = running.stderr
            self.stats.append(self._stats(running))
        self._running.clear()
        return self.stats

    def _stats(self, running: _Running) -> CaptureStats:
        counts = {kind: int(n) for n, kind in _STAT.findall("\n".join(running.stderr))}
        captured = counts.get("captured")
        return CaptureStats(
            label=running.point.label, file=running.file.name, captured=captured,
            received_by_filter=counts.get("received by filter"),
            dropped_by_kernel=counts.get("dropped by kernel"),
            packet_limit=self.packet_limit, limit_hit=captured is not None and captured >= self.packet_limit,
            bytes=running.file.stat().st_size if running.file.exists() else 0,
            exit_code=running.process.returncode,
        )
