"""Slow start seen in a capture (case 08): bursts of data, and the first flight of each.

A *flight* is what the sender puts on the wire before the receiver's first ACK of that
data comes back: with a capture at the sender it is the congestion window the burst
started with (initcwnd on a new connection, the restart window after idle).
"""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np
import pandas as pd

from tcplab.analysis.table import flow_view
from tcplab.lab import netns
from tcplab.units import format_duration
from tcplab.cases.trial import Trial

__all__ = ["bursts", "first_flights", "first_window", "full_segment", "data_rounds", "cached_entry", "start_drops", "stop_drops", "settled_tcp_metrics",
           "rounds_to_send", "rounds_to_grow", "restart_window", "growth_time", "idle_row", "sender_ss"]


def _data_and_acks(packets, flow: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    view, _, direction = flow_view(packets, flow)
    data = view[(view["dir"] == direction) & (view["len"] > 0)]
    acks = view[(view["dir"] != direction) & view["f_ack"]]
    return data, acks


def bursts(packets, flow: int | None = None, *, gap_s: float = 0.25) -> pd.DataFrame:
    """The data direction's bursts: runs of segments with no silence longer than ``gap_s``
    (start, end, segments, bytes). An application's responses separated by idle time each
    make one burst; a run that only sends earlier data again (a retransmission timeout's,
    after the silence of a lost tail) is no response and is left out."""
    data, _ = _data_and_acks(packets, flow)
    times = data["rel_time"].to_numpy()
    number = (pd.Series(times).diff().fillna(0) > gap_s).cumsum().to_numpy()
    ends = (data["seq"] + data["len"]).to_numpy()
    new = ends > np.concatenate([[-np.inf], np.maximum.accumulate(ends)[:-1]])
    grouped = data.assign(burst=number, new=new).groupby("burst")
    frame = pd.DataFrame({"start": grouped["rel_time"].min(), "end": grouped["rel_time"].max(),
                          "segments": grouped.size(), "bytes": grouped["len"].sum()})
    return frame[grouped["new"].any()].reset_index(drop=True)


def first_flights(packets, flow: int | None = None, *, gap_s: float = 0.25) -> pd.DataFrame:
    """Per burst: the segments sent from its first segment until the first ACK covering that
    segment arrived (``segments``, ``bytes`` of payload), and that ACK's delay (``ack_after_s``)."""
    data, acks = _data_and_acks(packets, flow)
    rows: list[dict[str, Any]] = []
    for burst in bursts(packets, flow, gap_s=gap_s).itertuples():
        mine = data[(data["rel_time"] >= burst.start) & (data["rel_time"] <= burst.end)]
        first = mine.iloc[0]
        covering = acks[(acks["rel_time"] > first["rel_time"]) & (acks["ack"] > first["seq"])]
        until = covering["rel_time"].iloc[0] if len(covering) else burst.end + 1.0
        sent = mine[mine["rel_time"] < until]
        if "retransmission" in sent:
            sent = sent[~sent["retransmission"].astype(bool)]
        rows.append({"burst": len(rows) + 1, "start": float(burst.start), "segments": int(len(sent)),
                     "bytes": int(sent["len"].sum()),
                     "ack_after_s": float(until - first["rel_time"]), "burst_segments": int(burst.segments)})
    return pd.DataFrame(rows)


def first_window(packets, flow: int | None = None) -> int:
    """The window the receiver offered when the first data segment left (bytes): its last
    advertisement before it. It caps the first flight however large the sender's initcwnd."""
    data, acks = _data_and_acks(packets, flow)
    if data.empty:
        return 0
    before = acks[acks["rel_time"] <= data["rel_time"].iloc[0]]
    return int(before["win"].iloc[-1]) if len(before) else 0


def full_segment(packets, flow: int | None = None) -> int:
    """The payload of a full data segment in the capture (bytes): the largest one sent. It is
    what a window holds per segment, the MSS less the options every segment carries (1448 of
    an MSS of 1460 with timestamps), not the MSS the handshake announced."""
    data, _ = _data_and_acks(packets, flow)
    return int(data["len"].max()) if len(data) else 0


def data_rounds(packets, rtt_s: float, flow: int | None = None) -> int:
    """Round trips a transfer's data took, counted in the capture: flights of data separated by
    silences longer than a quarter of the round trip (within a flight, segments leave as the
    previous flight's ACKs arrive, a serialization time apart)."""
    data, _ = _data_and_acks(packets, flow)
    times = np.sort(data["rel_time"].to_numpy())
    return int(1 + (np.diff(times) > rtt_s / 4).sum()) if times.size else 0


#: How ``ip tcp_metrics`` writes a time ("1.580sec", "44633us", "200ms"), and each unit in seconds.
_IP_TIME = re.compile(r"^(\d+(?:\.\d+)?)(sec|ms|us)$")
_IP_TIME_UNITS = {"sec": 1.0, "ms": 1e-3, "us": 1e-6}


def cached_entry(metrics: list[dict[str, str]], address: str) -> dict[str, Any]:
    """The ``ip tcp_metrics show`` entry for ``address``: counts as int, times (age, rtt,
    rttvar, …) written as every page writes a duration ("44.6 ms", not ip's "44633us"); an
    empty dict when the kernel keeps nothing for it."""
    for entry in metrics:
        if entry.get("address") == address:
            out: dict[str, Any] = dict(entry)
            for key, value in entry.items():
                if key in ("ssthresh", "cwnd", "reordering"):
                    out[key] = int(value)
                elif match := _IP_TIME.match(value):
                    out[key] = format_duration(float(match[1]) * _IP_TIME_UNITS[match[2]])
            return out
    return {}


# --- a lossy spell on a live path ------------------------------------------------------------

def _drop_rule(percent: float) -> list[str]:
    """Packets the router forwards from the server's side (data of a download), dropped at
    random: iptables' statistic match, after the delay line has held them."""
    return ["FORWARD", "-i", "to-server", "-m", "statistic", "--mode", "random",
            "--probability", f"{percent / 100:.4f}", "-j", "DROP"]


def start_drops(router: Any, percent: float) -> None:
    """Begin dropping ``percent`` % of the server's packets on ``router`` (a live path's
    router host), for a lossy spell between runs on one path."""
    if not 0 < percent < 100:
        raise ValueError(f"percent must be between 0 and 100, got {percent!r}")
    netns.iptables(router.ns, ["-I", *_drop_rule(percent)])


def stop_drops(router: Any, percent: float) -> None:
    """End the spell :func:`start_drops` began."""
    netns.iptables(router.ns, ["-D", *_drop_rule(percent)], check=False)


def settled_tcp_metrics(host: Any, *, timeout: float = 5.0) -> list[dict[str, str]]:
    """``host``'s tcp_metrics once its connections have finished closing: the kernel saves a
    connection's metrics only at the end of its close handshake, which may come a round trip
    after the application is done."""
    deadline = time.monotonic() + timeout
    closing = ["ss", "-tanH", "state", "established", "state", "close-wait", "state", "last-ack",
               "state", "fin-wait-1", "state", "fin-wait-2", "state", "closing", "state", "syn-sent",
               "state", "syn-recv"]
    while host.run(closing).stdout.strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    return host.tcp_metrics()


# --- predictions -----------------------------------------------------------------------------

def rounds_to_send(segments: int, initcwnd: int) -> int:
    """Round trips slow start needs to send ``segments`` from a window of ``initcwnd``
    doubling each round: the smallest r with initcwnd × (2^r − 1) ≥ segments."""
    if segments <= 0:
        return 0
    rounds, sent, cwnd = 0, 0, initcwnd
    while sent < segments:
        sent += cwnd
        cwnd *= 2
        rounds += 1
    return rounds


def restart_window(cwnd: int, idle_s: float, rto_s: float, initcwnd: int = 10) -> int:
    """The window after ``idle_s`` of silence (tcp_cwnd_restart): halved once per RTO that
    fits in the idle time, never below the initial window."""
    idle = idle_s - rto_s
    while idle > 0 and cwnd > initcwnd:
        cwnd //= 2
        idle -= rto_s
    return max(cwnd, initcwnd)


def rounds_to_grow(start: float, target: float, growth: float) -> int:
    """Round trips a window needs to grow from ``start`` to ``target`` segments by ``growth``
    per round trip (cubic in congestion avoidance with no loss yet: 1.05): the smallest n
    with start × growth^n ≥ target."""
    if start <= 0 or growth <= 1:
        raise ValueError(f"start must be positive and growth above 1, got {start!r} and {growth!r}")
    rounds, cwnd = 0, float(start)
    while cwnd < target:
        cwnd *= growth
        rounds += 1
    return rounds


def growth_time(size: int, rtt_s: float, rate_bps: float, *, start_cwnd: int = 10, growth: float = 1.05,
                mss: int = 1448) -> float:
    """Seconds to send ``size`` bytes when the window starts at ``start_cwnd`` segments and
    grows by ``growth`` per round trip (cubic in congestion avoidance with no loss yet:
    5 % per RTT), capped at the path's bandwidth-delay product."""
    bdp = rate_bps * rtt_s / 8 / mss
    left, cwnd, elapsed = size / mss, float(start_cwnd), 0.0
    while left > 0:
        if cwnd >= bdp:
            return elapsed + left * mss * 8 / rate_bps
        left -= cwnd
        cwnd *= growth
        elapsed += rtt_s
    return elapsed


# --- reading the runs ------------------------------------------------------------------------

def sender_ss(trial: Trial) -> pd.DataFrame:
    """The sending socket's ``ss`` samples (state ESTAB): ``time`` on the capture's clock,
    ``cwnd`` and ``ssthresh`` in segments. ``ss`` shows the socket's own ssthresh (absent
    until set); the ``tcp_probe`` tracepoint shows the *current* one, max(ssthresh, ¾ cwnd)
    outside loss recovery, so it is not the value a connection starts with."""
    rows = trial.socket_samples()
    view, _, _ = flow_view(trial.packets)
    offset = float((view["time"] - view["rel_time"]).iloc[0])
    return pd.DataFrame({"time": rows["time"].to_numpy() - offset, "cwnd": rows["cwnd"].to_numpy(),
                         "ssthresh": rows["ssthresh"].to_numpy()})


def idle_row(trial: Trial) -> dict[str, Any]:
    """An idle-burst trial in numbers: per burst, the response time (from the client's
    request to its last byte), the first flight, and the segments sent again."""
    data, _ = _data_and_acks(trial.packets)
    ends = (data["seq"] + data["len"]).to_numpy()
    again = ends <= np.concatenate([[-1], np.maximum.accumulate(ends)[:-1]])
    resent_at = data["rel_time"].to_numpy()[again]
    flights = first_flights(trial.packets)
    latency = [r["latency"] for r in trial.app.requests]
    starts = list(flights["start"]) + [np.inf]
    row: dict[str, Any] = {"cc": trial.socket("server").get("cc")}
    for i, (lat, flight) in enumerate(zip(latency, flights["segments"]), 1):
        row[f"burst {i} ms"] = 1e3 * lat
        row[f"burst {i} first flight"] = int(flight)
        row[f"burst {i} resent"] = int(((resent_at >= starts[i - 1]) & (resent_at < starts[i])).sum())
    return row
