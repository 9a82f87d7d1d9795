"""Global TCP memory pressure (case 09): ``net.ipv4.tcp_mem`` and what the kernel reports
when a socket is refused memory (the ``sock:sock_exceed_buf_limit`` tracepoint).

``tcp_mem`` is three numbers in pages (4096 bytes here) for all TCP sockets of the host
together: *low*, *pressure*, *high*.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["PAGE", "TCP_MEM", "read_tcp_mem", "limits", "exceed_events", "exceed_summary", "receiver_clamp"]

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


def exceed_events(trial: Any) -> pd.DataFrame:
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


def exceed_summary(trial: Any) -> dict[str, Any]:
    """Counts by kind, the first event's time and allocated pages, the limits it recorded."""
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
        "limits_seen": str(events["sysctl_mem"].mode().iloc[0]).replace(",", " "),
        "protocols": sorted(events["proto"].astype(str).unique()),
    }


def receiver_clamp(trial: Any, side: str = "client") -> pd.DataFrame:
    """The receiver's advertised-window ceiling over time (``ss`` rcv_ssthresh and rb), its
    advmss, and the ceiling in segments: under memory pressure Linux cuts rcv_ssthresh to
    4 × advmss."""
    tel = trial.telemetry
    rows = tel[(tel["side"] == side) & (tel["state"] == "ESTAB")].sort_values("time")
    out = pd.DataFrame({"time": rows["time"], "rcv_ssthresh": rows["rcv_ssthresh"], "rb": rows["skmem_rb"],
                        "advmss": rows["advmss"] if "advmss" in rows else rows["mss"]})
    out["segments"] = out["rcv_ssthresh"] / out["advmss"]
    return out.reset_index(drop=True)
