"""What to observe during a run: the parameters of capture, socket sampling and tracing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..params import Params, param
from .capture import CAPTURE_POINTS


@dataclass(frozen=True)
class ObserveSpec(Params):
    capture: str = param("choice", "sender", "where tcpdump captures: sender, receiver, both, router, or none",
                         choices=CAPTURE_POINTS + ("none",))
    snaplen: int = param("int", 128, "bytes kept of each captured packet (headers only)", low=68, high=65535)
    capture_limit: int = param("size", "256MB", "largest pcap kept per capture point", low=1024, high=16 * 1024**3)
    telemetry: bool = param("bool", True, "sample ss -tinm in client and server during the run")
    interval: float = param("duration", "20ms", "time between two ss samples", low=0.005, high=1.0)
    tracepoints: bool = param("bool", True, "record tcp_probe and buffer tracepoints through tracefs")

    @classmethod
    def of_run(cls, run: Any) -> "ObserveSpec":
        """What a run record (:class:`tcplab.runs.Run`) was asked to observe."""
        return cls.from_record(run.params.get("observe", {}))
