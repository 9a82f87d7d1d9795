"""iperf: iperf3 client and server, their JSON reports turned into an AppResult."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Mapping

from ..params import param
from .base import BUFFER_MAX, IO_MAX, SIDES, SIZE_MAX, Workload, register
from .result import AppResult
from .running import RunningWorkload
from .streams import DIRECTIONS

#: iperf3 refuses more parallel streams than this (``-P``).
IPERF_STREAMS_MAX = 128


@register
@dataclass(frozen=True)
class Iperf(Workload):
    """iperf3 moves at least ``size`` bytes: it rounds up to whole ``write_size`` blocks, and its
    receiver may count a few hundred bytes more than were asked for. With ``streams`` > 1 the
    bytes are spread over that many connections at once; the result counts them together."""

    name: ClassVar[str] = "iperf"

    size: int = param("size", "4MB", "payload bytes (iperf3 -n)", low=0, low_open=True, high=SIZE_MAX)
    direction: str = param("choice", "download", "download: server -> client (iperf3 -R); upload: client -> server",
                           choices=DIRECTIONS)
    window: int | None = param("size", None, "iperf3 -w: SO_SNDBUF and SO_RCVBUF of both sides; unset: autotuning",
                               low=1, high=BUFFER_MAX, optional=True)
    write_size: int = param("size", "128KB", "bytes per write (iperf3 -l)", low=1, high=IO_MAX)
    nodelay: bool = param("bool", False, "TCP_NODELAY (iperf3 -N)")
    streams: int = param("int", 1, "parallel connections sharing the size (iperf3 -P)", low=1, high=IPERF_STREAMS_MAX)

    def sender(self) -> str:
        return "server" if self.direction == "download" else "client"

    def buffers(self) -> Iterator[tuple[str, int | None, str]]:
        yield "window", self.window, "net.core.wmem_max"
        yield "window", self.window, "net.core.rmem_max"

    def commands(self, path: Any) -> dict[str, list[str]]:
        address, port = path.server.address, str(self.port)
        client = ["iperf3", "-c", address, "-p", port, "--json", "-n", str(self.size),
                  "-l", str(self.write_size), "-C", self.cc]
        if self.direction == "download":
            client.append("-R")
        if self.window is not None:
            client += ["-w", str(self.window)]
        if self.nodelay:
            client.append("-N")
        if self.streams > 1:
            client += ["-P", str(self.streams)]
        return {"server": ["iperf3", "-s", "-1", "-B", address, "-p", port, "--json"], "client": client}

    def summarize(self, reports: Mapping[str, dict], running: RunningWorkload) -> AppResult:
        problems = [f"{side}: {reports[side]['error']}" for side in SIDES if reports[side].get("error")]
        problems += [f"{side}: no report" for side in SIDES if not reports[side]]
        received = reports["client"].get("end", {}).get("sum_received", {})
        bytes_ = received.get("bytes", 0)
        if not problems and bytes_ < self.size:
            problems.append(f"iperf3 received {bytes_} of {self.size} bytes")
        # iperf3 reports durations, not instants: the client's exit is the end of the transfer.
        end = running.exited.get("client")
        start = end - received["seconds"] if end is not None and "seconds" in received else None
        return AppResult(
            workload=self.name, ok=not problems, error="; ".join(problems) or None, bytes=bytes_,
            start=start, end=end if start is not None else None,
            requests=[{"start": start, "end": end, "latency": received["seconds"], "bytes": bytes_}] if start else [],
            sockets={side: self._socket(side, reports[side]) for side in SIDES},
            extra={"retransmits": reports[self.sender()].get("end", {}).get("sum_sent", {}).get("retransmits"),
                   # the connections iperf3 opened, as its client reports them (-P)
                   "streams": len(reports["client"].get("start", {}).get("connected", []))},
        )

    def _socket(self, side: str, report: Mapping[str, Any]) -> dict[str, Any]:
        # With several streams, the first connection stands for all: they share every setting.
        start, end = report.get("start", {}), report.get("end", {})
        connected = (start.get("connected") or [{}])[0]
        role = "sender" if side == self.sender() else "receiver"
        return {
            "sndbuf_requested": self.window, "sndbuf": start.get("sndbuf_actual"),
            "rcvbuf_requested": self.window, "rcvbuf": start.get("rcvbuf_actual"),
            "cc": end.get(f"{role}_tcp_congestion"), "nodelay": self.nodelay,
            "local_port": connected.get("local_port"), "peer_port": connected.get("remote_port"),
            "mss": start.get("tcp_mss_default"), "window_clamp": None,
        }
