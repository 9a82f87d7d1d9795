"""Sweeps: one workload over a grid of settings (RTT × buffer, loss, …), read as one tidy table.

::

    variants = sweep.build(dict(rtt_ms=[10, 20, 40], rmem=[65536, 262144]),
                           lambda v: (Bulk(size=..., cc="cubic"), PathSpec(rtt=f"{v['rtt_ms']}ms", ...)),
                           name="rmem-{rmem}-rtt-{rtt_ms}ms")
    frame = sweep.run(lab, variants, repetitions=lab.pick(None, quick=1, full=3))
    plots.sweep_lines(frame, x="rmem", y="steady Mbit/s", hue="rtt_ms", logx=True)

Each row of the frame is one trial: the variant's grid values, its label and repetition,
and what the capture and the application measured (see :data:`COLUMNS`). The trials
themselves stay in ``lab.trials`` under their labels, for time-sequence plots.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..analysis import theory
from ..units import ParameterError
from .trial import Trial

__all__ = ["Variant", "grid", "build", "whole_runs", "run", "measure", "steady_goodput", "steady_rate", "acked", "line_share_without_loss", "segment_size",
           "knee_from_slope", "budget_size", "COLUMNS"]

#: What :func:`measure` adds to a variant's values, per trial.
COLUMNS = {
    "goodput Mbit/s": "application goodput: bytes read / (last read - first write)",
    "steady Mbit/s": "capture: bytes delivered over the second half of the transfer, per second",
    "KB/s": "application goodput in kilobytes (1000 B) per second, the seeds' unit",
    "duration s": "first write to last read",
    "handshake rtt ms": "round trip the capture measured (handshake)",
    "rwnd median B": "median window the receiver advertised",
    "rwnd max B": "largest window the receiver advertised",
    "inflight max B": "most bytes in flight the capture saw",
    "Window Full": "data segments that filled the receiver's advertised window (Wireshark's tcp.analysis.window_full)",
    "window scaling": "on / off, from the handshake",
    "wscale": "the receiver's window scale shift (None when off)",
    "mss B": "segment size the receiver announced in its handshake",
    "segment B": "median payload of the data segments really sent",
    "data packets": "data segments sent, retransmissions included",
    "retransmissions": "segments resent, by sequence coverage (no byte beyond the highest sent before)",
    "retransmitted %": "retransmissions / data packets",
    "timeouts": "retransmissions sent by a timer (RTO or tail-loss probe), not by duplicate ACKs",
    "fast retransmits": "retransmissions triggered by duplicate ACKs / SACK",
}


@dataclass(frozen=True)
class Variant:
    """One point of a grid: its ``label``, what to run and on which path, and its ``values``."""

    label: str
    workload: Any
    path: Any
    values: Mapping[str, Any] = field(default_factory=dict)


def grid(**axes: Sequence[Any]) -> list[dict[str, Any]]:
    """Every combination of the axes' values, the first axis varying slowest."""
    for name, values in axes.items():
        if isinstance(values, (str, bytes)) or not len(values):
            raise ParameterError(name, values, "a non-empty list of values")
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


def build(axes: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]],
          make: Callable[[dict[str, Any]], tuple[Any, Any]], *, name: str | Callable[[dict[str, Any]], str]
          ) -> list[Variant]:
    """Variants for a grid (``axes``, see :func:`grid`) or an explicit list of points.

    ``make(values)`` returns ``(workload, path)``; ``name`` is a format string over the
    values (``"rtt-{rtt_ms}ms"``) or a function of them; labels must be unique.
    """
    points = grid(**axes) if isinstance(axes, Mapping) else [dict(p) for p in axes]
    out: list[Variant] = []
    for values in points:
        label = name.format(**values) if isinstance(name, str) else name(values)
        workload, path = make(values)
        out.append(Variant(label, workload, path, values))
    labels = [v.label for v in out]
    if len(set(labels)) != len(labels):
        twice = sorted({x for x in labels if labels.count(x) > 1})
        raise ParameterError("name", name, "a label that differs for every point", f"repeated: {', '.join(twice)}")
    return out


#: Share of the line a steady rate reaches without random loss, for a floor: model-based
#: bbr paces at the bottleneck's rate once it has measured it, but its start overshoots the
#: one-BDP bottleneck queue too (6.8 and 8.9 % of segments resent in two lossless quick runs
#: on 6.18), and where the recovery falls into the steady half of a 4 MB transfer it reads
#: lower: 1.0 of the line in one of those runs, 0.90 in the other. A loss-based sender's
#: start overflows the queue, and the cuts that follow (0.7 each in cubic; two in the
#: measured runs) can leave about one BDP in flight for the seconds cubic takes to grow back.
#: One BDP fills the line only at the base round trip, and a kernel busy with the transfer
#: stretches it (UML's 6.1 at 100 Mbit/s: 20 to 28 ms, a 0.8 s run at 0.82 of the line).
LINE_SHARE_WITHOUT_LOSS = {"bbr": 0.8, "loss-based": 0.75}


def line_share_without_loss(cc: str) -> float:
    """The floor of steady goodput / line for congestion control ``cc`` on a lossless path."""
    return LINE_SHARE_WITHOUT_LOSS["bbr" if cc == "bbr" else "loss-based"]


def acked(trial: Trial) -> pd.DataFrame:
    """The cumulative ACK of the trial's data flow as the capture saw it: one row per ACK of the
    other direction, ``time`` (s, the capture's clock) and ``acked`` (bytes acknowledged so far),
    for :func:`steady_goodput`'s rate over ACK times."""
    m = trial.metrics
    packets = getattr(getattr(trial, "packets", None), "packets", None)
    if packets is None or not {"rel_time", "ack", "f_ack"} <= set(packets.columns):
        return pd.DataFrame({"time": [], "acked": []})
    columns = ["rel_time", "ack"] + (["sack_count"] if "sack_count" in packets.columns else [])
    acks = packets.loc[(packets["flow"] == m.flow) & (packets["dir"] != m.data_dir) & packets["f_ack"].astype(bool),
                       columns]
    holes = acks["sack_count"].to_numpy() > 0 if "sack_count" in acks else np.zeros(len(acks), bool)
    return pd.DataFrame({"time": acks["rel_time"].to_numpy(float), "acked": acks["ack"].cummax().to_numpy(float),
                         "hole": holes})


def steady_rate(trial: Trial) -> float:
    """A trial's steady goodput (bit/s), over ACK times (:func:`steady_goodput` with :func:`acked`)."""
    return steady_goodput(trial.metrics, acks=acked(trial))


def steady_goodput(metrics: Any, *, after: float = 0.5, statistic: str = "mean",
                   acks: pd.DataFrame | None = None) -> float:
    """Delivered bit/s once past the ramp, from the capture's per-round-trip delivery rates
    (the bins of ``metrics.throughput``) after ``after`` of the transfer (from its first
    delivered byte), the last (partial) bin left out. The mean (default) is the bytes delivered over that time: the rate as
    physics defines it. The median of the bins ("median") is not: the bins are as wide as
    the flow's median RTT sample, and a window-limited flow delivers its window in bursts one
    true round trip apart, so where the two differ, most bins hold exactly one burst and the
    median reads window / bin width. A case 07 run with a 22.85 ms bin on a 20.2 ms round
    trip read 22.9 Mbit/s by the median against 25.5 by the mean, and 25.0 at the
    application. A round trip slowed by a busy host is a disturbed run (observe.health), not
    something to hide with a median. A second half that would begin inside a loss recovery
    begins where the recovery ends (:func:`_past_recoveries`).

    With ``acks`` (:func:`acked`; the mean only), the same stretch is measured over ACK times: the
    bytes acknowledged from the first ACK in it to the last, over the time between those two ACKs.
    A bin's edges fall between ACKs, so the bins' mean counts the bytes of whole ACKs over a span
    the ACKs did not take, and a lossless cubic run of case 06 read 11.9558 MB/s by its bins on
    a line that carries at most 11.9551 (:func:`tcplab.report.scores.below_line`); between two
    ACKs the rate is what crossed the line between them, which the line bounds."""
    if not 0 <= after < 1:
        raise ParameterError("after", after, "a share from 0 to below 1")
    if statistic not in ("median", "mean"):
        raise ParameterError("statistic", statistic, "median or mean")
    bins = metrics.throughput
    if bins is None or bins.empty:
        return math.nan
    full = bins.iloc[:-1] if len(bins) > 1 else bins
    # The transfer starts with its first data, not its first packet: on a lossy path a lost
    # SYN-ACK keeps the handshake silent for a second or more, which is no part of the rate.
    delivering = full.loc[full["delivered_bps"] > 0]
    if not delivering.empty:
        full = full.loc[full["time"] >= delivering["time"].iloc[0]]
    start = float(full["time"].iloc[0])
    span = float(full["time"].iloc[-1]) + metrics.bin_s - start
    late = full.loc[full["time"] >= _past_recoveries(metrics, start + after * span)]
    if late.empty:
        late = full.iloc[-1:]
    if acks is not None and statistic == "mean" and len(acks) >= 2:
        begin, end = float(late["time"].iloc[0]), float(late["time"].iloc[-1]) + metrics.bin_s
        # From the first ACK to the last of the stretch that report no hole (no SACK block): only
        # there is the cumulative ACK every byte delivered so far. An ACK behind a hole holds back
        # bytes that already crossed the line, and the ACK that fills it counts them at once: a
        # stretch from inside such a hole read above the line (case 06 live, a cubic run with two
        # losses in its second half: 12.72 MB/s over ACK times on an 11.96 MB/s line).
        stretch = acks.loc[(acks["time"] >= begin) & (acks["time"] <= end)]
        clean = stretch.loc[~stretch["hole"].astype(bool)] if "hole" in stretch else stretch
        if len(clean) >= 2 and clean["time"].iloc[-1] > clean["time"].iloc[0]:
            first, last = _same_phase_ends(stretch, clean)
            return float(8 * (last["acked"] - first["acked"]) / (last["time"] - first["time"]))
        acked_at = np.interp([begin, end], acks["time"].to_numpy(float), acks["acked"].to_numpy(float))
        return float(8 * (acked_at[1] - acked_at[0]) / (end - begin))
    return float(getattr(late["delivered_bps"], statistic)())


#: ACKs come in bursts, one a round trip, where the gaps between bursts hold at least this share
#: of a stretch's time: a window-limited flow sends its window at line rate, then waits. A
#: flow the line clocks has no such gaps (a late packet's few milliseconds are a sliver of it).
BURST_IDLE_SHARE = 0.3
#: A gap between bursts: this many times the stretch's median gap between ACKs, and 1 ms at least.
BURST_GAP_MEDIANS = 4.0
BURST_GAP_MIN_S = 1e-3
#: ... and at least this share of the typical such gap (case 07 at 80 ms: a 1.1 ms pause inside
#: a burst beside 76 ms silences between them).
BURST_GAP_SHARE = 0.5


def _same_phase_ends(stretch: pd.DataFrame, clean: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The two ACKs a rate over ACK times is read between, of the stretch's ACKs that report no
    hole (``clean``): its first and last, or, where the stretch's ACKs come in bursts
    (:data:`BURST_IDLE_SHARE`), the first ACK of its first burst and of its last. From a burst's
    first ACK to the last of a later one the bytes count one window more than the round trips
    between them carry: case 07's 64 KB window at 80 ms read 7.40 Mbit/s over the five round
    trips of its steady half, 13 % above 64 KB per round trip, which a window cannot carry (the
    fresh clone's make test). Bursts are read from every ACK: leaving out those that report a
    hole would make gaps of their own."""
    times = stretch["time"].to_numpy(float)
    if len(times) >= 3:
        gaps = np.diff(times)
        between = gaps > max(BURST_GAP_MEDIANS * float(np.median(gaps)), BURST_GAP_MIN_S)
        if between.any():
            # A pause inside a burst (a late packet's millisecond) is no round trip's silence:
            # the silences between bursts are alike, and far longer.
            between &= gaps >= BURST_GAP_SHARE * float(np.median(gaps[between]))
        if gaps[between].sum() >= BURST_IDLE_SHARE * (times[-1] - times[0]):
            starts = stretch.iloc[np.flatnonzero(between) + 1]  # each burst's first ACK, after a gap
            if "hole" in starts:
                starts = starts.loc[~starts["hole"].astype(bool)]
            if len(starts) >= 2:
                return starts.iloc[0], starts.iloc[-1]
    return clean.iloc[0], clean.iloc[-1]


def _past_recoveries(metrics: Any, cut: float) -> float:
    """``cut``, or where the loss recoveries it falls in end. Inside a recovery the cumulative
    ACK waits at the hole while the segments behind it arrive; when the hole is filled it jumps
    past all of them. A steady half that began inside would count as delivered in it the bytes
    that crossed the line before it, and read above the line (a case 06 run: 12.75 MB/s on an
    11.96 MB/s line)."""
    recoveries = metrics.series()["recoveries"]
    while True:
        inside = recoveries.loc[(recoveries["start"] <= cut) & (recoveries["end"] > cut), "end"]
        if inside.empty:
            return cut
        cut = float(inside.max())


def segment_size(trial: Trial) -> float:
    """Median payload bytes of the data direction's segments (NaN without packets)."""
    m = trial.metrics
    packets = getattr(getattr(trial, "packets", None), "packets", None)
    if packets is None:
        return math.nan
    data = packets.loc[(packets["flow"] == m.flow) & (packets["dir"] == m.data_dir) & (packets["len"] > 0), "len"]
    return float(data.median()) if len(data) else math.nan


def measure(trial: Trial) -> dict[str, Any]:
    """The numbers a sweep compares, for one trial (keys: :data:`COLUMNS`)."""
    m = trial.metrics
    packets = int(m.data_packets)
    return {
        "goodput Mbit/s": trial.goodput_bps / 1e6,
        "steady Mbit/s": steady_rate(trial) / 1e6,
        "KB/s": trial.goodput_bps / 8e3,
        "duration s": trial.duration_s,
        "handshake rtt ms": 1e3 * m.rtt_s,
        "rwnd median B": m.rwnd_median_bytes,
        "rwnd max B": m.rwnd_max_bytes,
        "inflight max B": m.inflight_max_bytes,
        "Window Full": int(m.window_full),
        "window scaling": m.window_scaling,
        "wscale": m.receiver_wscale,
        "mss B": m.mss,
        "segment B": segment_size(trial),
        "data packets": packets,
        # By sequence coverage, as case 06 counts them: at the sender every resent segment is a
        # retransmission, while Wireshark's rule calls one that follows the previous segment
        # closely "out-of-order" (in UML, at 2 ms, about half of them at 10 % loss).
        "retransmissions": int(m.resent_segments),
        "retransmitted %": 100 * m.resent_segments / packets if packets else math.nan,
        "timeouts": int(m.timeouts),
        "fast retransmits": int(m.fast_retransmissions),
    }


def whole_runs(name: str, value: Any) -> int:
    """``value``, a notebook parameter ``name`` that counts runs, checked before any run: a whole
    number ≥ 1, else a ParameterError that names the parameter."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(name, value, "a whole number ≥ 1")
    return value


def run(lab: Any, variants: Sequence[Variant], *, repetitions: int = 1,
        observe: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Run (or replay) every variant ``repetitions`` times through ``lab``; one row per trial.

    With one repetition a variant keeps its own label; with more, its trials are
    ``label#1`` … (as :meth:`CaseLab.repeat` names them).
    """
    repetitions = whole_runs("repetitions", repetitions)
    rows = []
    for variant in variants:
        if repetitions == 1:
            trials = [lab.run(variant.label, variant.workload, path=variant.path, observe=observe)]
        else:
            trials = lab.repeat(variant.label, variant.workload, path=variant.path, times=repetitions,
                                observe=observe)
        for rep, trial in enumerate(trials, 1):
            rows.append({**variant.values, "variant": variant.label, "repetition": rep, "trial": trial.label,
                         **measure(trial)})
    return pd.DataFrame(rows)


def knee_from_slope(frame: pd.DataFrame, x: str, y: str, ceiling: float,
                    window_limited: pd.Series) -> tuple[float, float, float]:
    """The knee the way the physics defines it, with its spread: below the knee throughput is
    window / RTT, in proportion to the buffer ``x``, so each window-limited run (rows where
    ``window_limited``) gives a slope ``y / x``; the knee is where that line meets ``ceiling``
    (the line's goodput, in ``y``'s unit). Returns (knee from the median slope, from the
    steepest, from the shallowest): NaN three times without a window-limited run.

    Unlike "the first buffer whose throughput reaches 80 % of the line" (what this case used
    before), this does not hang
    on the one grid point that sits at the knee, where a little noise moves the answer from
    that point to the next (512 KB to 4 MB on a 20 ms path)."""
    rows = frame[window_limited & (frame[x] > 0) & (frame[y] > 0)]
    if rows.empty:
        return math.nan, math.nan, math.nan
    slopes = rows[y] / rows[x]
    return ceiling / float(slopes.median()), ceiling / float(slopes.max()), ceiling / float(slopes.min())


def budget_size(seconds: float, rtt_s: float, rate_bps: float, *, window: float | None = None,
                floor: int = 16 * 1024, ceiling: int = 64 * 1024**2) -> int:
    """Bytes that take about ``seconds`` at the speed theory expects (``window`` per round
    trip, at most the line rate), in whole KiB within [floor, ceiling]: a time-bounded
    transfer whose size is still a fixed parameter (so replay can match it)."""
    if not seconds > 0:
        raise ParameterError("seconds", seconds, "a duration above 0 s")
    speed = theory.max_goodput(rate_bps) if window is None else theory.window_limited_throughput(
        window, rtt_s, theory.max_goodput(rate_bps))
    size = int(np.ceil(speed / 8 * seconds / 1024)) * 1024
    return int(min(max(size, floor), ceiling))
