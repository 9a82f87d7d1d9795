"""Socket-buffer cases (01 send buffer, 02 receive buffer): the few numbers their notebooks
read off a :class:`~tcplab.cases.Trial` beyond what the trial itself offers.

Everything here works on a trial's record only (packets, ``ss`` samples, the side
programs' reports), so it gives the same answer live and in replay.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import tempfile
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from ..observe import trace

__all__ = ["send_wait", "burst_starts", "burst_spacing", "advertised_windows",
           "handshake_wscale", "handshake_window", "scaling_ratios", "sendbuf_row", "rcvbuf_row", "goodput_frame",
           "parse_sendmsg", "sendmsg_summary", "sendmsg_trace", "trace_sendmsg"]


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
    ss = trial.socket_samples(trial.sender)
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
    ss = trial.socket_samples(trial.receiver)
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


# --------------------------------------------------------------- how tcp_sendmsg fills buffers

_SENDMSG = re.compile(r"^\s*(?P<comm>\S+)-(?P<pid>\d+)\s.*tcp_sendmsg_locked: skb_addr (?P<addr>\S+) "
                      r"skb_len (?P<len>-?\d+) msg_left (?P<left>\d+) size_goal (?P<goal>\d+)")


def parse_sendmsg(text: str, *, comm: str = "python") -> pd.DataFrame:
    """The ``tcp:tcp_sendmsg_locked`` events of the busiest ``comm`` process in a trace.

    The event has no socket identity, so the sender is told apart by its process: the
    busiest process named ``comm`` (tcplab's side programs run as "python"). One row per
    turn of the copy loop in ``tcp_sendmsg_locked``: the write queue's tail buffer
    (``addr`` 0: the queue is empty), its length, the bytes of the call still to copy, the
    size goal."""
    rows = [m.groupdict() for m in map(_SENDMSG.match, text.splitlines()) if m and m["comm"] == comm]
    frame = pd.DataFrame(rows, columns=["comm", "pid", "addr", "len", "left", "goal"])
    if frame.empty:
        return frame
    frame[["pid", "len", "left", "goal"]] = frame[["pid", "len", "left", "goal"]].astype(int)
    frame["addr"] = frame["addr"].map(lambda a: int(a, 16))
    busiest = frame["pid"].value_counts().idxmax()
    return frame[frame["pid"] == busiest].reset_index(drop=True)


def sendmsg_summary(events: pd.DataFrame, writes: int) -> dict[str, float]:
    """What each turn of the copy loop found at the tail of the write queue, for ``writes``
    application writes. Only a new buffer is checked against ``sk_sndbuf`` (a turn that
    waited for room is counted again when it retries); bytes appended to an unfinished tail
    buffer are not checked."""
    empty = events["addr"] == 0
    full = ~empty & (events["len"] >= events["goal"])
    append = ~empty & ~full & (events["len"] > 0)
    return {
        "application writes": writes,
        "copy-loop turns": len(events),
        "new buffer, write queue empty (checked)": int(empty.sum()),
        "new buffer, tail full (checked)": int(full.sum()),
        "appended to an unfinished tail (not checked)": int(append.sum()),
        "tail full, per write": float(full.sum()) / writes if writes else float("nan"),
        "size goal (median)": float(events["goal"].median()) if len(events) else float("nan"),
    }


@contextlib.contextmanager
def sendmsg_trace() -> Iterator[Callable[[], str]]:
    """Record ``tcp:tcp_sendmsg_locked`` in a private tracefs instance (removed on exit, and by
    ``tcplab cleanup`` if this process dies); yields a function that returns the trace text."""
    if not trace.ensure_tracefs():
        raise RuntimeError("tracefs is not available")
    instance = trace.TRACEFS / "instances" / f"{trace.INSTANCE_PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
    instance.mkdir()
    enable = instance / "events" / "tcp" / "tcp_sendmsg_locked" / "enable"
    try:
        (instance / "buffer_size_kb").write_text("4096")
        enable.write_text("1")
        yield lambda: (instance / "trace").read_text()
    finally:
        with contextlib.suppress(OSError):
            enable.write_text("0")
        instance.rmdir()


def trace_sendmsg(path: Any, workload: Any) -> dict[str, float]:
    """Run ``workload`` once on a live ``path`` (not recorded, no capture) while tracing how
    the sender's ``send()`` calls fill the send buffer; :func:`sendmsg_summary` of it."""
    with tempfile.TemporaryDirectory() as logs, sendmsg_trace() as read:
        result = workload.run(path, logs)
        text = read()
    if not result.ok:
        raise RuntimeError(f"traced run failed: {result.error}")
    return sendmsg_summary(parse_sendmsg(text), -(-workload.size // workload.write_size))
