"""Case 04, Nagle meets delayed ACK: request latencies, the header/body gap in the capture,
and what theory predicts for a request written in pieces.

The Reqresp workload writes a 16-byte header (:data:`HEADER`) and a body; with ``split`` they
are two writes. Latencies come from the client program (one per request); the first
:data:`WARMUP` requests are left out of the statistics, because a new connection ACKs at
once for its first exchanges (quick-ack mode) and only then starts to delay its ACKs.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from tcplab.analysis import theory
from tcplab.observe.ss import socket_rows
from tcplab.cases.trial import Trial

__all__ = ["HEADER", "WARMUP", "latencies_ms", "latency_table", "predicted_latency", "header_body_gaps",
           "segments_per_request", "ato_ms", "tcp_settings", "latency_histogram", "one_request"]

HEADER = 16  # bytes of the Reqresp request header (programs/rpc.py)
WARMUP = 3
#: The sysctls that decide whether small writes wait (read in the client's namespace).
SETTINGS = ("net.ipv4.tcp_autocorking", "net.ipv4.tcp_pingpong_thresh", "net.ipv4.tcp_delack_max",
            "net.ipv4.tcp_notsent_lowat", "net.ipv4.tcp_congestion_control")


def latencies_ms(trial: Trial, warmup: int = WARMUP) -> np.ndarray:
    """Each request's latency as the client measured it (write of the request to the last
    byte of the response), in ms, after the first ``warmup`` requests."""
    return np.array([r["latency"] for r in (trial.app.requests or [])][warmup:], float) * 1e3


def predicted_latency(rtt_s: float, writes: Sequence[int], *, nodelay: bool = False, mss: int = 1448,
                      ato_s: float = theory.TCP_DELACK_MIN) -> float:
    """One round trip, plus what :func:`theory.nagle_stall` adds for a request written as
    ``writes`` (seconds): 2·RTT + ato when the tail waits for a delayed ACK."""
    verdict = theory.nagle_stall(writes, mss, nodelay, rtt_s=rtt_s, delack_s=ato_s)
    return rtt_s + verdict.expected_delay_s


def latency_table(trials: Mapping[str, Trial], predicted_s: Mapping[str, float] | None = None,
                  warmup: int = WARMUP) -> pd.DataFrame:
    """One row per variant: requests counted, median / p10 / p90 latency (ms), and the
    prediction (ms) when given."""
    rows = []
    for label, trial in trials.items():
        lat = latencies_ms(trial, warmup)
        row = {"variant": label, "requests": len(lat),
               "median ms": float(np.median(lat)) if len(lat) else math.nan,
               "p10 ms": float(np.percentile(lat, 10)) if len(lat) else math.nan,
               "p90 ms": float(np.percentile(lat, 90)) if len(lat) else math.nan}
        if predicted_s is not None:
            row["predicted ms"] = 1e3 * predicted_s[label] if label in predicted_s else math.nan
        rows.append(row)
    return pd.DataFrame(rows).set_index("variant")


def _client_flow(trial: Trial) -> pd.DataFrame:
    pk = trial.packets.packets
    flow = pk.loc[pk["len"] > 0, "flow"].mode().iloc[0]
    return pk[pk["flow"] == flow].sort_values("rel_time").reset_index(drop=True)


def header_body_gaps(trial: Trial, header: int = HEADER, warmup: int = WARMUP) -> pd.DataFrame:
    """For each request sent as a header segment and then a body segment (client → server):
    when each left, the gap between them, and the last packet the server sent before the
    body left (its time, whether it was a pure ACK of the header, and how long after it the
    body followed). Read from a capture at the client."""
    pk = _client_flow(trial)
    cols = ["header_t", "body_t", "gap_ms", "ack_t", "pure_ack", "body_after_ack_ms"]
    data = pk[(pk["dir"] == 0) & (pk["len"] > 0)]
    rows = []
    for i, j in zip(data.index[:-1], data.index[1:]):
        first, second = pk.loc[i], pk.loc[j]
        if first["len"] != header or second["seq"] != first["seq"] + header:
            continue
        between = pk.loc[i + 1:j - 1]
        back = between[between["dir"] == 1]
        if len(back):
            last = back.iloc[-1]
            ack_t, pure = float(last["rel_time"]), bool(last["len"] == 0 and last["ack"] >= first["seq"] + header)
        else:
            ack_t, pure = math.nan, False
        rows.append((float(first["rel_time"]), float(second["rel_time"]),
                     1e3 * float(second["rel_time"] - first["rel_time"]), ack_t, pure,
                     1e3 * (float(second["rel_time"]) - ack_t)))
    return pd.DataFrame(rows[warmup:], columns=cols)


def segments_per_request(trial: Trial) -> float:
    """Client data segments per request (2 when header and body leave separately, 1 when
    the kernel sent them together)."""
    pk = _client_flow(trial)
    requests = len(trial.app.requests or []) or 1
    return float(((pk["dir"] == 0) & (pk["len"] > 0)).sum()) / requests


def ato_ms(trial: Trial, side: str = "server") -> pd.Series:
    """The delayed-ACK timeout ``ss -i`` showed on ``side``'s connected socket (ms)."""
    tel = trial.telemetry
    if tel.empty or "ato" not in tel:
        return pd.Series(dtype=float)
    rows = socket_rows(tel, side)
    return (1e3 * pd.to_numeric(rows["ato"], errors="coerce")).dropna().reset_index(drop=True)


def tcp_settings(trial: Trial, side: str = "client", names: Sequence[str] = SETTINGS) -> dict[str, str]:
    """The TCP sysctls that shape small writes and ACKs, as ``side``'s namespace had them
    during the run (from the run record, so replay shows them too)."""
    recorded = trial.run.sysctls.get(side, {})
    return {name: recorded.get(name, "absent") for name in names}


def latency_histogram(trials: Mapping[str, Trial], *, warmup: int = WARMUP, ax=None, title: str | None = None,
                      language: str | None = None):
    """Request latencies per variant on one log-scaled axis (ms), labelled in the page's language."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ..words import messages

    word = messages(language)
    frame = pd.concat([pd.DataFrame({"latency ms": latencies_ms(t, warmup), "variant": label})
                       for label, t in trials.items()], ignore_index=True)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    sns.histplot(frame, x="latency ms", hue="variant", log_scale=True, element="step", bins=60, ax=ax)
    ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500) if frame["latency ms"].min() / 1.5 <= t
             <= frame["latency ms"].max() * 1.5]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel(word("plot.request_latency_log"))
    ax.set_ylabel(word("plot.requests"))
    if ax.get_legend() is not None:
        ax.get_legend().set_title(word.column("variant"))
    if title:
        ax.set_title(title)
    return ax


def one_request(trial: Trial, gaps: pd.DataFrame | None = None, *, ax=None):
    """The time-sequence graph of one split request (the middle one of :func:`header_body_gaps`):
    zoomed on its time and on its own bytes, so that header, silence, ACK and body show."""
    import matplotlib.pyplot as plt

    from .. import plots
    from ..words import messages

    gaps = header_body_gaps(trial) if gaps is None else gaps
    one = gaps.iloc[len(gaps) // 2]
    pk = _client_flow(trial)
    sent = pk[(pk["dir"] == 0) & (pk["len"] > 0) & (pk["rel_time"] >= one.header_t) & (pk["rel_time"] <= one.body_t)]
    low, high = float(sent["seq"].min()), float((sent["seq"] + sent["len"]).max())
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    plots.time_sequence(trial.packets, t_range=(one.header_t - 0.002, one.body_t + 0.004), ax=ax, stall_s=0.010)
    margin = 0.25 * (high - low)
    ax.set_ylim(low - margin, high + margin)
    ax.set_ylabel(messages()("plot.sequence", unit="B"))
    ax.yaxis.set_major_locator(plt.MaxNLocator(6))
    ax.yaxis.set_major_formatter(plt.ScalarFormatter())
    return ax
