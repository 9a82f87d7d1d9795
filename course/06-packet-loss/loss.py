"""Random loss (case 06): how big a transfer to make, what was resent, how the window was cut.

Everything reads a trial's record (the sender-side capture and the kernel's ``tcp_probe``
tracepoint), so it answers the same live and in replay.

Resent segments are counted by sequence coverage (:attr:`FlowMetrics.resent_segments`),
not by Wireshark's labels: the expert analysis calls some of them "out of order" (the
receiver's window grew while it was sending duplicate ACKs, so those ACKs count as window
updates, not duplicates).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from tcplab.analysis import theory
from tcplab.analysis.table import flow_view
from tcplab.cases import sweep
from tcplab.cases.trial import Trial

__all__ = ["expected_goodput", "transfer_size", "seconds_for", "lasting", "sender_probe", "window_cuts",
           "cuts_table", "timeouts", "measure", "points", "label", "run", "summary"]

#: Sender silence before a resend that makes it a retransmission *timeout*: Linux's RTO is
#: at least 200 ms (TCP_RTO_MIN); a tail-loss probe fires after about two round trips.
RTO_SILENCE_S = 0.18
#: Loss from this share on: a loss-based sender recovers by retransmission timeouts more than
#: by fast recovery.
HEAVY_LOSS = 0.05
#: Such a transfer lasts this many times longer. Its timeouts come about once a second (the UML
#: kernel, 20 ms, 10 %, 2026-11: 16 in 23 s over six runs of about 3 s), so a transfer of a
#: few seconds left their count to chance: two of those six had none, and a check that counts
#: them failed a third of the time.
HEAVY_LOSS_STRETCH = 3


#: What a loss-based run under loss records: the capture (headers, SACK blocks included)
#: and the kernel's tcp_probe samples for its window. Runs at line rate (no loss, or bbr)
#: need no window trace; they keep the capture for goodput and resends.
WATCH = {"snaplen": 96}
WATCH_LIGHT = {"snaplen": 96, "tracepoints": False}


def expected_goodput(cc: str, rtt_s: float, loss_fraction: float, rate_bps: float, *, mss: int = 1448) -> float:
    """A rough guess of the goodput (bit/s), only to size a transfer that lasts a few seconds:
    the line without loss; for bbr the line up to 2 % loss, falling as 1/p above (measured
    here: a fifth of the line at 10 %); for a loss-based cc 1.5 × the Mathis bound below
    5 % loss, half of it above (timeouts take over)."""
    line = theory.max_goodput(rate_bps)
    if loss_fraction <= 0:
        return line
    if cc == "bbr":
        return line * min(1.0, 0.02 / loss_fraction)
    factor = 1.5 if loss_fraction < HEAVY_LOSS else 0.5
    return min(line, factor * theory.mathis_throughput(mss, rtt_s, loss_fraction))


def transfer_size(seconds: float, cc: str, rtt_s: float, loss_fraction: float, rate_bps: float,
                  *, mss: int = 1448) -> int:
    """Bytes that should take about ``seconds`` once past the start (see
    :func:`expected_goodput`), plus what the start sends before the first losses are
    repaired (about 3/p segments: slow start runs until a loss, and overshoots), in KiB."""
    bps = expected_goodput(cc, rtt_s, loss_fraction, rate_bps)
    start = 3 * mss / loss_fraction if loss_fraction > 0 else 0
    steady = sweep.budget_size(seconds, rtt_s, rate_bps, window=bps * rtt_s / 8, floor=64 * 1024)
    return int(min(steady + start, 256 * 1024**2) // 1024 * 1024)


def seconds_for(seconds: float, rtt_s: float) -> float:
    """Longer paths need longer transfers (a loss cycle lasts more round trips' worth of
    time): ``seconds`` at 20 ms and below, times √(rtt / 20 ms) above."""
    return seconds * max(1.0, math.sqrt(rtt_s / 0.020))


def sender_probe(trial: Trial) -> pd.DataFrame:
    """The sender's congestion window over time: ``time`` in seconds on the capture's clock
    (``rel_time``), ``cwnd`` and ``ssthresh`` in segments; ``attrs["source"]`` says whence ("tcp_probe" or
    "ss", in words on a page as ``plot.probe_source.<source>``).

    From the ``tcp_probe`` tracepoint (one sample per ACK) where the kernel has it. It
    reports the *current* threshold (``tcp_current_ssthresh``): the socket's ssthresh during
    loss recovery, max(ssthresh, ¾ cwnd) otherwise; entering recovery therefore always
    shows as a drop to the new ssthresh. A kernel built without ftrace (Debian's UML
    kernel) has no tracepoints: the sender's socket samples stand in, one per sampling
    interval, with the socket's own ssthresh."""
    view, _, _ = flow_view(trial.packets)
    offset = float((view["time"] - view["rel_time"]).iloc[0]) if len(view) else 0.0
    trace = trial.trace
    if trace is not None and not trace.empty and "snd_cwnd" in trace:
        sender_addr = trial.run.environment.get("path", {}).get("addresses", {}).get(trial.sender)
        rows = trace[(trace["event"] == "tcp_probe")]
        if sender_addr:
            rows = rows[rows["src"].astype(str).str.startswith(sender_addr + ":")]
        ssthresh = rows["ssthresh"].astype(float).where(rows["ssthresh"] < 2**30)
        out = pd.DataFrame({"time": rows["time"].astype(float) - offset, "cwnd": rows["snd_cwnd"].astype(float),
                            "ssthresh": ssthresh})
        source = "tcp_probe"
    else:
        rows = trial.socket_samples(trial.sender)
        out = pd.DataFrame({"time": rows["time"].astype(float) - offset, "cwnd": rows["cwnd"].astype(float),
                            "ssthresh": rows["ssthresh"].astype(float)}, columns=["time", "cwnd", "ssthresh"])
        source = "ss"
    out = out.sort_values("time").reset_index(drop=True)
    out.attrs["source"] = source
    return out


def window_cuts(probe: pd.DataFrame) -> pd.DataFrame:
    """Every lowering of ssthresh (a loss event): the cwnd just before it, the new ssthresh,
    their ratio (cubic: 0.7), and the smallest cwnd after it, until the next cut or for 0.5 s,
    whichever comes first (the next cut's own reduction is its row's, not this one's)."""
    if probe.empty:
        return pd.DataFrame(columns=["time", "cwnd_before", "ssthresh_after", "ratio", "cwnd_min_after"])
    ss = probe["ssthresh"].to_numpy()
    prev = np.concatenate([[np.inf], ss[:-1]])
    prev = np.where(np.isnan(prev), np.inf, prev)
    cut = ~np.isnan(ss) & (ss < prev)
    rows = []
    times, cwnd = probe["time"].to_numpy(), probe["cwnd"].to_numpy()
    cuts = np.flatnonzero(cut)
    for k, i in enumerate(cuts):
        if i == 0:
            continue
        until = min(times[i] + 0.5, times[cuts[k + 1]]) if k + 1 < len(cuts) else times[i] + 0.5
        after = cwnd[(times >= times[i]) & ((times < until) | (times == times[i]))]
        rows.append({"time": times[i], "cwnd_before": cwnd[i - 1], "ssthresh_after": ss[i],
                     "ratio": ss[i] / cwnd[i - 1], "cwnd_min_after": float(after.min())})
    return pd.DataFrame(rows, columns=["time", "cwnd_before", "ssthresh_after", "ratio", "cwnd_min_after"])


def cuts_table(cuts: pd.DataFrame, first: int | None = None) -> pd.DataFrame:
    """:func:`window_cuts` as a page shows them, in order of time (the first ``first`` of them
    where given), the time headed with its unit: seconds into the run, on the capture's clock
    (``time s``, as case 09's events table heads its own)."""
    shown = cuts if first is None else cuts.head(first)
    return shown.rename(columns={"time": "time s"}).reset_index(drop=True)


def timeouts(trial: Trial, probe: pd.DataFrame | None = None) -> pd.DataFrame:
    """Resends after ≥ :data:`RTO_SILENCE_S` of sender silence (retransmission timeouts), with
    the smallest cwnd the sender reported in the 0.3 s after each."""
    view, _, direction = flow_view(trial.packets)
    sent = view.loc[(view["dir"] == direction) & (view["len"] > 0), "rel_time"].to_numpy()
    resent = trial.metrics.resent["time"].to_numpy()
    before = sent[np.maximum(np.searchsorted(sent, resent, side="left") - 1, 0)] if len(sent) else resent
    silence = np.where(resent > sent[0], resent - before, 0.0) if len(sent) else resent * 0
    hit = silence >= RTO_SILENCE_S
    probe = sender_probe(trial) if probe is None else probe
    rows = []
    for when, quiet in zip(resent[hit], silence[hit]):
        window = probe[(probe["time"] >= when) & (probe["time"] <= when + 0.3)]["cwnd"]
        rows.append({"time": when, "silence_s": quiet,
                     "cwnd_min_after": float(window.min()) if len(window) else math.nan})
    return pd.DataFrame(rows, columns=["time", "silence_s", "cwnd_min_after"])


def measure(trial: Trial) -> dict[str, Any]:
    """The loss-specific numbers of one trial: resent share, loss events, cut ratio, timeouts,
    and the median round trip, which a queue the sender fills lifts above the path's own."""
    m = trial.metrics
    probe = sender_probe(trial)
    cuts = window_cuts(probe)
    big = cuts[cuts["cwnd_before"] >= 10]
    rto = timeouts(trial, probe)
    share = m.resent_segments / m.data_packets if m.data_packets else math.nan
    return {"resent %": 100 * share, "resent": m.resent_segments, "segments": m.data_packets,
            "loss events": len(cuts), "cut ratio": float(big["ratio"].median()) if len(big) else math.nan,
            "timeouts": len(rto),
            "cwnd after timeout": float(rto["cwnd_min_after"].median()) if len(rto) else math.nan,
            "rtt median ms": 1e3 * m.rtt_median_s}


def points(losses: dict[str, list[float]], ccs: list[str], repetitions: int) -> list[dict[str, Any]]:
    """The grid as a list: ``losses`` maps an RTT ("20ms") to its loss percentages; every
    point is run under each cc, once per seed 1 … ``repetitions`` (a different random loss
    pattern per repetition: the delay line's losses follow its seed)."""
    return [{"rtt": rtt, "loss %": float(p), "cc": cc, "seed": seed}
            for rtt, percents in losses.items() for p in percents for cc in ccs
            for seed in range(1, repetitions + 1)]


def label(point: dict[str, Any]) -> str:
    return f"{point['cc']}-{point['rtt']}-{point['loss %']:g}pct-seed{point['seed']}"


def lasting(seconds: float, cc: str, rtt_s: float, loss_fraction: float) -> float:
    """How long a point's transfer should last: ``seconds`` for a loss-based cc under loss
    (longer on long paths, :func:`seconds_for`), :data:`HEAVY_LOSS_STRETCH` times that under
    heavy loss; a quarter of it without loss and for bbr, which settle within a few round trips."""
    if cc == "bbr" or loss_fraction == 0:
        return seconds / 4
    stretch = HEAVY_LOSS_STRETCH if loss_fraction >= HEAVY_LOSS else 1
    return stretch * seconds_for(seconds, rtt_s)


def run(lab: Any, grid: list[dict[str, Any]], *, rate: str, seconds: float, prefix: str = "",
        **path_fields: Any) -> pd.DataFrame:
    """Run (or replay) the grid: one path per (rtt, loss, seed), on which each cc's bulk
    download runs in turn (cc set on the sending socket; the loss pattern continues from
    one run to the next). ``path_fields`` adds :class:`PathSpec` fields to every path (an exercise's
    sysctls, queue or one-way shape) and ``prefix`` to every run's label, so that such runs
    are recorded apart from the case's own. One row per trial: the point, :func:`sweep.measure`'s columns,
    :func:`measure`'s, goodput in MB/s (whole and second half of the transfer), the
    Mathis bound for the point (MB/s, NaN without loss) and the ratios to it."""
    from ..lab import PathSpec
    from ..traffic import Bulk

    groups: dict[tuple, list[dict[str, Any]]] = {}
    for point in grid:
        groups.setdefault((point["rtt"], point["loss %"], point["seed"]), []).append(point)
    rows = []
    for (rtt, percent, seed), points_here in groups.items():
        spec = PathSpec(rtt=rtt, rate=rate, loss=f"{percent:g}%", seed=seed, **path_fields)
        with lab.path(spec) as path:
            for point in points_here:
                size = transfer_size(lasting(seconds, point["cc"], spec.rtt, spec.loss / 100), point["cc"],
                                     spec.rtt, spec.loss / 100, spec.rate)
                watch = WATCH if point["cc"] != "bbr" and percent > 0 else WATCH_LIGHT
                trial = lab.run(prefix + label(point), Bulk(size=size, cc=point["cc"]), path=path, observe=watch)
                rows.append({**point, "trial": trial.label, **sweep.measure(trial), **measure(trial),
                             "rtt_s": trial.rtt_s,
                             # the average rate, stalls included: loss makes many round trips deliver nothing
                             "steady MB/s": sweep.steady_rate(trial) / 8e6})
    frame = pd.DataFrame(rows)
    frame["MB/s"] = frame["goodput Mbit/s"] / 8
    frame["Mathis MB/s"] = [theory.mathis_throughput(1448, r, p / 100) / 8e6 if p > 0 else math.nan
                            for r, p in zip(frame["rtt_s"], frame["loss %"])]
    frame["vs Mathis"] = frame["MB/s"] / frame["Mathis MB/s"]
    frame["steady vs Mathis"] = frame["steady MB/s"] / frame["Mathis MB/s"]
    frame["line"] = frame["cc"] + " " + frame["rtt"]
    return frame.drop(columns=["rtt_s"])


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean per (rtt, loss, cc) over repetitions: goodput (whole transfer and its second
    half), the Mathis bound, steady goodput / bound, resent share, loss events, timeouts."""
    cols = ["MB/s", "steady MB/s", "Mathis MB/s", "steady vs Mathis", "resent %", "loss events", "timeouts"]
    return frame.groupby(["rtt", "loss %", "cc"])[cols].mean().round(3)


#: What :func:`by_run` shows of each run.
COMPARED = ["MB/s", "steady MB/s", "handshake rtt ms", "rtt median ms", "resent %", "loss events", "timeouts"]


def by_run(*frames: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`run`'s frames side by side, one per run (its label), without averaging:
    an exercise's runs beside the case's own where :func:`summary` would merge them."""
    return pd.concat(frames).set_index("trial")[COMPARED].round(3)
