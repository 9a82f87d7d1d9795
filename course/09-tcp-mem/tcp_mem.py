"""Global TCP memory pressure (case 09): ``net.ipv4.tcp_mem`` and what the kernel reports
when a socket is refused memory (the ``sock:sock_exceed_buf_limit`` tracepoint).

``tcp_mem`` is three numbers in pages (4096 bytes here) for all TCP sockets of the host
together: *low*, *pressure*, *high*.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import termios
import time
from pathlib import Path
from typing import Any

import pandas as pd

from tcplab.observe.ss import socket_rows
from tcplab.units import parse_size
from tcplab.cases.trial import Trial

__all__ = ["PAGE", "TCP_MEM", "read_tcp_mem", "limits", "limits_text", "exceed_events", "events_table", "exceed_summary",
           "receiver_clamp",
           "PRESSURE_COUNTERS", "pressure_counters", "outcome", "outcomes", "Ballast"]

PAGE = 4096
TCP_MEM = Path("/proc/sys/net/ipv4/tcp_mem")
EVENT = "sock_exceed_buf_limit"


def read_tcp_mem() -> str:
    """The host's ``net.ipv4.tcp_mem`` as the kernel prints it, normalised to "low pressure high"."""
    return " ".join(TCP_MEM.read_text().split())


def limits(tcp_mem: str) -> dict[str, int]:
    """``"64 96 128"`` → {"low": 64, "pressure": 96, "high": 128} (pages)."""
    low, pressure, high = (int(v) for v in str(tcp_mem).replace(",", " ").split())
    return {"low": low, "pressure": pressure, "high": high}


def exceed_events(trial: Trial) -> pd.DataFrame:
    """The run's ``sock_exceed_buf_limit`` records: time (s from the first packet), kind,
    allocated pages, the limits in force, and the refused socket's queues."""
    trace = trial.trace
    if trace.empty or "event" not in trace:
        return pd.DataFrame(columns=["t", "kind", "proto", "allocated", "sysctl_mem", "rmem_alloc", "wmem_queued"])
    rows = trace[trace["event"] == EVENT].copy()
    start = float(trial.packets.packets["time"].min()) if len(trial.packets.packets) else float(trace["time"].min())
    rows["t"] = rows["time"] - start
    keep = ["t", "kind", "proto", "allocated", "sysctl_mem", "rmem_alloc", "wmem_queued"]
    return rows[[c for c in keep if c in rows]].reset_index(drop=True)


def limits_text(tcp_mem: str) -> str:
    """``"64,96,128"`` as the case writes its three limits: "64 / 96 / 128 pages", each grouped as
    a table writes a number. A table translates it by its key (``cell.{low} / {pressure} / {high}
    pages``)."""
    from ..report.tables import cell_text

    values = limits(tcp_mem)
    return f"{cell_text(values['low'])} / {cell_text(values['pressure'])} / {cell_text(values['high'])} pages"


def events_table(trial: Trial, first: int | None = None) -> pd.DataFrame:
    """:func:`exceed_events` as a page shows them, in the order the kernel recorded them (the
    first ``first`` of them where given): each column with its unit (the time in s from the
    run's first packet, the pages allocated, the refused socket's queues in bytes) and the
    limits in force written as the case writes them (:func:`limits_text`)."""
    events = exceed_events(trial)
    if first is not None:
        events = events.head(first)
    columns = {"t": "time s", "kind": "kind", "proto": "proto", "allocated": "allocated pages",
               "sysctl_mem": "tcp_mem in force", "rmem_alloc": "rmem alloc B", "wmem_queued": "wmem queued B"}
    shown = events[[c for c in columns if c in events]].copy()
    if "sysctl_mem" in shown:
        shown["sysctl_mem"] = shown["sysctl_mem"].map(limits_text)
    return shown.rename(columns=columns).reset_index(drop=True)


def exceed_summary(trial: Trial) -> dict[str, Any]:
    """Counts by kind, the first event's time and allocated pages, the limits it recorded most
    often, written as the case writes them (:func:`limits_text`: "64 / 96 / 128 pages")."""
    events = exceed_events(trial)
    if events.empty:
        return {"events": 0, "SK_MEM_SEND": 0, "SK_MEM_RECV": 0, "first_t": None, "first_allocated": None,
                "limits_seen": None, "protocols": []}
    kinds = events["kind"].value_counts()
    return {
        "events": int(len(events)),
        "SK_MEM_SEND": int(kinds.get("SK_MEM_SEND", 0)),
        "SK_MEM_RECV": int(kinds.get("SK_MEM_RECV", 0)),
        "first_t": float(events["t"].min()),
        "first_allocated": int(events.loc[events["t"].idxmin(), "allocated"]),
        "limits_seen": limits_text(events["sysctl_mem"].mode().iloc[0]),
        "protocols": sorted(events["proto"].astype(str).unique()),
    }


#: The nstat counters that name memory pressure without a tracepoint: entries into memory
#: pressure, and in-order segments a receiver dropped because it could not get memory while its
#: queue held data (out-of-order ones count in TcpExtTCPOFODrop). The pressure flag
#: is the host's, but the kernel counts an entry once, when the flag goes up, in the network
#: namespace of the socket whose allocation raised it (tcp_enter_memory_pressure): a run's
#: namespaces count it only when one of their sockets was first.
PRESSURE_COUNTERS = ("TcpExtTCPMemoryPressures", "TcpExtTCPRcvQDrop")


def pressure_counters(trial: Trial) -> dict[str, int]:
    """How much the run moved :data:`PRESSURE_COUNTERS`, both ends together."""
    return {name: sum(int(trial.counters(side).get(name, 0)) for side in ("client", "server"))
            for name in PRESSURE_COUNTERS}


def receiver_clamp(trial: Trial, side: str = "client") -> pd.DataFrame:
    """The receiver's advertised-window ceiling over time (``ss`` rcv_ssthresh and rb), its
    advmss, and the ceiling in segments: under memory pressure Linux cuts rcv_ssthresh to
    4 × advmss."""
    tel = trial.telemetry
    rows = socket_rows(tel, side)
    out = pd.DataFrame({"time": rows["time"], "rcv_ssthresh": rows["rcv_ssthresh"], "rb": rows["skmem_rb"],
                        "advmss": rows["advmss"] if "advmss" in rows else rows["mss"]})
    out["segments"] = out["rcv_ssthresh"] / out["advmss"]
    return out.reset_index(drop=True)


def outcome(trial: Trial) -> dict[str, Any]:
    """One run under a ``tcp_mem`` setting in a row: its goodput, the receiver's window
    ceiling (its least, which shows whether pressure ever cut it, and its median, where it
    stayed), the tracepoint's refusals by kind (None on a kernel without the tracepoint: not
    counted, rather than none), the refusals the packets show, and the kernel's pressure
    counters. The case's comparison and each exercise's table are these rows, run beside run."""
    refused = exceed_summary(trial) if trial.traced(EVENT) else {"SK_MEM_SEND": None, "SK_MEM_RECV": None}
    ceiling = receiver_clamp(trial)["rcv_ssthresh"]
    return {"goodput (KB/s)": round(trial.goodput_bps / 8 / 1000, 1),
            "receiver rcv_ssthresh (B, min)": int(ceiling.min()),
            "receiver rcv_ssthresh (B, median)": int(ceiling.median()),
            "SK_MEM_SEND events": refused["SK_MEM_SEND"], "SK_MEM_RECV events": refused["SK_MEM_RECV"],
            "segments sent again": trial.metrics.resent_segments,
            "zero-window advertisements": trial.metrics.zero_window_packets,
            **pressure_counters(trial)}


def outcomes(*trials: Trial) -> pd.DataFrame:
    """:func:`outcome` of each run, a column per run; counts stay whole numbers."""
    return pd.DataFrame({t.label: pd.Series(outcome(t), dtype=object) for t in trials})


#: ioctl of the bytes a socket has written but its peer not yet acknowledged (linux/sockios.h)
SIOCOUTQ = termios.TIOCOUTQ


class Ballast:
    """Another application on the host holding ``size`` bytes of TCP memory: loopback
    connections in the host's namespace whose receivers never read.

    The kernel counts TCP memory per CPU in batches of ``net.core.mem_pcpu_rsv`` pages and
    only then adds them to the global count that ``tcp_mem`` is compared with, so a single
    small transfer may never move the global count at all. A few MB held here move it for
    certain. One connection holds at most what ``rmem_max`` and ``wmem_max`` let its two
    buffers grow to (about 0.8 MB with stock limits), so the ballast opens as many as it
    needs. Create it *before* the limits are squeezed (it is then allocated freely), close
    it after. It belongs in the lab's kernel, whose ``tcp_mem`` the runs share:
    ``with lab.holding(Ballast, size) as held:`` puts it there.
    """

    #: No progress for this long: the connection's buffers are full, open the next one.
    FULL_AFTER_S = 0.2
    MAX_CONNECTIONS = 64

    def __init__(self, size: Any = "4MB", *, timeout: float = 5.0) -> None:
        self.size = parse_size("ballast", size)
        self.timeout = timeout
        self.sent = 0
        self._listener: socket.socket | None = None
        self._pairs: list[tuple[socket.socket, socket.socket]] = []

    def __enter__(self) -> "Ballast":
        try:
            self._fill()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fill(self) -> None:
        self._listener = listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.size)  # inherited by accepted sockets
        listener.bind(("127.0.0.1", 0))
        listener.listen(self.MAX_CONNECTIONS)
        deadline = time.monotonic() + self.timeout
        while self.sent < self.size and len(self._pairs) < self.MAX_CONNECTIONS and time.monotonic() < deadline:
            sender = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.size)
            sender.connect(listener.getsockname())
            receiver, _ = listener.accept()
            self._pairs.append((sender, receiver))
            pushed = self._push(sender, self.size - self.sent, deadline)
            self.sent += pushed
            if pushed == 0:
                break

    def _push(self, sender: socket.socket, wanted: int, deadline: float) -> int:
        """Send up to ``wanted`` bytes until the connection's buffers are full."""
        sender.setblocking(False)
        chunk = bytes(65536)
        sent, last_progress = 0, time.monotonic()
        while sent < wanted and time.monotonic() - last_progress < self.FULL_AFTER_S and time.monotonic() < deadline:
            try:
                sent += sender.send(chunk[: min(len(chunk), wanted - sent)])
                last_progress = time.monotonic()
            except BlockingIOError:
                time.sleep(0.01)
        return sent

    #: How long :meth:`held` waits for the senders to see what their receivers queued acknowledged.
    SETTLE_S = 1.0

    def held(self) -> dict[str, int]:
        """Bytes of payload: what the ballast wrote, what lies unread at its receivers and what
        its senders hold unacknowledged. A byte that has reached a receiver stays queued at its
        sender too until the sender has processed the acknowledgement, and counts at both ends
        until then; so this waits (:data:`SETTLE_S` at most) until no byte counts twice, and
        ``unread`` + ``unacknowledged`` is ``written``, the payload the runs find held."""

        def ioctl(sock: socket.socket, request: int) -> int:
            return struct.unpack("i", fcntl.ioctl(sock.fileno(), request, b"\0" * 4))[0]

        def read() -> tuple[int, int]:
            return (sum(ioctl(receiver, termios.FIONREAD) for _, receiver in self._pairs),
                    sum(ioctl(sender, SIOCOUTQ) for sender, _ in self._pairs))

        deadline = time.monotonic() + self.SETTLE_S
        unread, unacknowledged = read()
        while self._pairs and unread + unacknowledged > self.sent and time.monotonic() < deadline:
            time.sleep(0.01)
            unread, unacknowledged = read()
        return {"written": self.sent, "unread": unread, "unacknowledged": unacknowledged}

    def close(self) -> None:
        for pair in self._pairs:
            for sock in pair:
                sock.close()
        self._pairs.clear()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
