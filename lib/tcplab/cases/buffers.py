"""Socket-buffer cases (01 send buffer, 02 receive buffer): the few numbers their notebooks
read off a :class:`~tcplab.cases.Trial` beyond what the trial itself offers.

Everything here works on a trial's record only (packets, ``ss`` samples, the side
programs' reports), so it gives the same answer live and in replay.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["socket_samples", "send_wait", "burst_starts", "burst_spacing", "advertised_windows",
           "handshake_wscale", "handshake_window", "scaling_ratios", "sendbuf_row", "rcvbuf_row", "goodput_frame"]


def socket_samples(telemetry: pd.DataFrame, side: str) -> pd.DataFrame:
    """The ``ss`` samples of ``side``'s connected socket (state ESTAB), in time order."""
    if telemetry.empty:
        return telemetry
    rows = telemetry[(telemetry["side"] == side) & (telemetry["state"] == "ESTAB")]
    return rows.sort_values("time").reset_index(drop=True)


def send_wait(trial: Any) -> dict[str, float]:
    """Seconds the sending program spent inside ``send()`` and that time's share of the
    transfer (first write to last byte read), from the side program's own report."""
    side = (trial.app.extra or {}).get("sides", {}).get(trial.sender, {})
    waited = float(side.get("send_wait_s", float("nan")))
    return {"send_wait_s": waited, "send_wait_share": waited / trial.duration_s}


def burst_starts(times: np.ndarray | pd.Series, gap_s: float) -> np.ndarray:
    """Start times of the bursts in a sorted series of packet times: a burst begins after a
    silence longer than ``gap_s``."""
    t = np.asarray(times, dtype=float)
    if t.size == 0:
        return t
    return np.concatenate([t[:1], t[1:][np.diff(t) > gap_s]])


def burst_spacing(trial: Any, gap_s: float = 0.005) -> float:
    """Median time between the starts of the sender's data bursts (NaN with fewer than 3)."""
    pk = trial.packets.packets
    flow = int(pk.groupby("flow")["len"].sum().idxmax())
    view = pk[(pk["flow"] == flow) & (pk["len"] > 0)]
    direction = int(view.groupby("dir")["len"].sum().idxmax())
    starts = burst_starts(view.loc[view["dir"] == direction, "rel_time"].sort_values(), gap_s)
    return float(np.median(np.diff(starts))) if starts.size >= 3 else float("nan")


def advertised_windows(packets: pd.DataFrame, receiver_dir: int) -> pd.Series:
    """Receive windows (bytes, scale applied) the receiver advertised after the handshake:
    its ACKs without SYN, indexed by ``rel_time``."""
    acks = packets[(packets["dir"] == receiver_dir) & packets["f_ack"] & ~packets["f_syn"] & (packets["win"] >= 0)]
    return acks.set_index("rel_time")["win"]


def handshake_wscale(packets: pd.DataFrame, from_dir: int) -> int | None:
    """The window-scale option in the SYN (or SYN-ACK) sent in direction ``from_dir``;
    None when it carried none."""
    syn = packets[(packets["dir"] == from_dir) & packets["f_syn"]]
    if syn.empty or int(syn["wscale"].iloc[0]) < 0:
        return None
    return int(syn["wscale"].iloc[0])


def handshake_window(packets: pd.DataFrame, from_dir: int) -> int | None:
    """The window field of the SYN (or SYN-ACK) sent in direction ``from_dir`` (never scaled)."""
    syn = packets[(packets["dir"] == from_dir) & packets["f_syn"]]
    return None if syn.empty else int(syn["win"].iloc[0])


def scaling_ratios(trace: pd.DataFrame) -> list[int]:
    """The receiver's learned ``scaling_ratio`` values (in 1/256) the tcp_rcvbuf_grow
    tracepoint reported, in order of first appearance."""
    if trace.empty or "scaling_ratio" not in trace:
        return []
    return [int(v) for v in pd.unique(trace["scaling_ratio"].dropna())]


def _receiver_dir(trial: Any) -> int:
    # dir 0 is client -> server in the packet table
    return 0 if trial.receiver == "client" else 1


def sendbuf_row(trial: Any) -> dict[str, Any]:
    """One line of case 01's table: what the sender asked, got, queued and put in flight."""
    ss = socket_samples(trial.telemetry, trial.sender)
    sock = trial.socket(trial.sender)
    m = trial.metrics
    mss = ss["mss"].median() if len(ss) else float("nan")
    return {
        "variant": trial.label,
        "cc": sock.get("cc"),
        "SO_SNDBUF asked": sock.get("sndbuf_requested"),
        "getsockopt": sock.get("sndbuf"),
        "ss tb": ss["skmem_tb"].median() if len(ss) else float("nan"),
        "peak w (queued)": ss["skmem_w"].max() if len(ss) else float("nan"),
        "peak Send-Q": ss["send_q"].max() if len(ss) else float("nan"),
        "in flight (median)": m.inflight_mean_bytes if np.isnan(m.inflight_plateau_bytes) else m.inflight_plateau_bytes,
        "cwnd x MSS (median)": (ss["cwnd"] * mss).median() if len(ss) else float("nan"),
        "duration s": trial.duration_s,
        "goodput MB/s": trial.goodput_bps / 8e6,
        "in send() %": 100 * send_wait(trial)["send_wait_share"],
    }


def rcvbuf_row(trial: Any) -> dict[str, Any]:
    """One line of case 02's table: the receiver's buffer, its window and what it allowed."""
    pk = trial.packets.packets
    rdir = _receiver_dir(trial)
    windows = advertised_windows(pk, rdir)
    sock = trial.socket(trial.receiver)
    ss = socket_samples(trial.telemetry, trial.receiver)
    ratios = scaling_ratios(trial.trace)
    return {
        "variant": trial.label,
        "added RTT ms": 1000 * trial.rtt_s if trial.rtt_s else 0.0,
        "SO_RCVBUF asked": sock.get("rcvbuf_requested"),
        "ss rb": ss["skmem_rb"].median() if len(ss) else float("nan"),
        "wscale offered": handshake_wscale(pk, rdir),
        "handshake window": handshake_window(pk, rdir),
        "window median": float(windows.median()) if len(windows) else float("nan"),
        "window max": float(windows.max()) if len(windows) else float("nan"),
        "scaling_ratio": ratios[-1] if ratios else None,
        "Window Full": int(pk["window_full"].sum()),
        "duration s": trial.duration_s,
        "goodput KB/s": trial.goodput_bps / 8 / 1024,
    }


def goodput_frame(trials: Any) -> pd.DataFrame:
    """One row per trial with its variant (the label without a ``#n`` repetition suffix),
    goodput in MB/s and duration, for a bar plot with confidence bands over repetitions."""
    return pd.DataFrame([{"variant": t.label.split("#", 1)[0], "goodput MB/s": t.goodput_bps / 8e6,
                          "duration s": t.duration_s} for t in trials])
