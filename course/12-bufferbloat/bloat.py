"""Case 12, bufferbloat: what a latency probe beside an upload saw of the bottleneck's queue, and
what the queue's size and the line rate predict.

The probe (:class:`tcplab.traffic.Probed`) sends a small datagram every interval, from before the
upload starts until it ends, and the server echoes it. Its round trips before the upload are the
path's own (the *base*); beside the upload each one also waits in the queue the upload keeps at
the bottleneck, so a round trip less the base is that queue's delay, and the delay times the line
rate is the queue in bytes (a FIFO serves every flow's packets in turn).

Theory here is computed from the path's parameters and kernel facts only, never from a run
(:class:`Predictions`); what the probe saw is :class:`ProbeView`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tcplab.analysis import theory
from tcplab.traffic.probed import probes_of

__all__ = ["CODEL_TARGET_S", "CODEL_INTERVAL_S", "BBR_CWND_GAIN", "BBR_EXTRA_SEGMENTS", "frame_bytes", "queue_delay_s",
           "one_bdp_queue", "Predictions", "probe_frame", "ProbeView", "view", "delay_frame", "median_of", "margin",
           "spread_tolerance", "kernel_table", "results_table", "probe_figure", "delay_figure"]

#: CoDel's target and interval (RFC 8289), fq_codel's defaults in Linux (``codel_params_init``):
#: a flow whose packets waited longer than the target for a whole interval has a standing queue,
#: and CoDel drops from it. CoDel's view of a queue is the lowest delay over an interval, which
#: a passing burst cannot raise; this module reads the probe's floor the same way, and its peak
#: as the median of an interval.
CODEL_TARGET_S = 0.005
CODEL_INTERVAL_S = 0.100
#: bbr's cap on what it keeps in flight, in bandwidth-delay products (tcp_bbr.c, ``bbr_cwnd_gain``).
BBR_CWND_GAIN = 2
#: Full-sized segments bbr adds to that cap (tcp_bbr.c, ``bbr_quantization_budget``: 3 × its TSO
#: goal of 2 segments at these rates, 1 to round up to an even count, 2 while it probes for more).
BBR_EXTRA_SEGMENTS = 3 * 2 + 1 + 2


# --- theory: from the path's parameters ------------------------------------------------------------

def frame_bytes(mtu: int = 1500) -> int:
    """A full-sized packet as the bottleneck's queue counts it (tbf counts the Ethernet header)."""
    return mtu + theory.ETHERNET_HEADER


def queue_delay_s(queue_bytes: float, rate_bps: float) -> float:
    """How long a packet waits behind ``queue_bytes`` at ``rate_bps``: the queue's bytes × 8 / rate."""
    return queue_bytes * 8 / rate_bps


def one_bdp_queue(rate_bps: float, rtt_s: float, mtu: int = 1500) -> int:
    """A queue of one bandwidth-delay product (the classic size of a router's buffer), in whole
    full-sized packets, two at least: a loss-based flow that halves its window still keeps the
    line busy behind it."""
    frames = max(2, math.ceil(theory.bdp(rate_bps, rtt_s) / frame_bytes(mtu)))
    return frames * frame_bytes(mtu)


@dataclass(frozen=True)
class Predictions:
    """What theory predicts for the case's path, from its parameters alone (seconds, bytes)."""

    rtt_s: float
    rate_bps: float
    deep_bytes: int
    small_bytes: int
    mtu: int = 1500

    @property
    def bdp_bytes(self) -> float:
        return theory.bdp(self.rate_bps, self.rtt_s)

    @property
    def frame_s(self) -> float:
        """One full-sized packet's time on the line: what a probe may wait behind the packet
        being sent, and the grain of every queue."""
        return queue_delay_s(frame_bytes(self.mtu), self.rate_bps)

    @property
    def deep_full_s(self) -> float:
        """The deep FIFO full: cubic fills any FIFO before it loses a packet."""
        return queue_delay_s(self.deep_bytes, self.rate_bps)

    @property
    def small_full_s(self) -> float:
        return queue_delay_s(self.small_bytes, self.rate_bps)

    @property
    def deep_floor_s(self) -> float:
        """The least the deep FIFO holds once cubic has lost a packet: it keeps β of the window
        it had (BDP + the full queue), and what exceeds one BDP of that waits in the queue."""
        kept = theory.CUBIC_BETA * (self.bdp_bytes + self.deep_bytes)
        return queue_delay_s(max(0.0, kept - self.bdp_bytes), self.rate_bps)

    @property
    def bbr_most_s(self) -> float:
        """bbr's queue at most: its cap on what is in flight less the BDP on the line."""
        cap = BBR_CWND_GAIN * self.bdp_bytes + BBR_EXTRA_SEGMENTS * frame_bytes(self.mtu)
        return queue_delay_s(cap - self.bdp_bytes, self.rate_bps)

    @property
    def aqm_s(self) -> float:
        """The probe under fq_codel or cake: in a queue of its own, served before the upload's, so
        it waits only for packets the line has already begun: none (at most two frames' time)."""
        return 0.0

    @property
    def ceiling_bps(self) -> float:
        """What the upload's payload can reach on the line (case 00)."""
        return theory.max_goodput(self.rate_bps, self.mtu)


# --- what the probe saw -------------------------------------------------------------------------------

def probe_frame(trial: Any) -> pd.DataFrame:
    """One row per probe of a run: ``t_s`` (sent, seconds after the upload's first write),
    ``rtt_s`` (NaN for a probe that never came back) and ``upload`` (sent between the upload's
    first write and its last byte read)."""
    app = trial.app
    frame = pd.DataFrame(probes_of(app), columns=["sent", "rtt_s"], dtype=float)
    frame["t_s"] = frame["sent"] - app.start
    frame["upload"] = (frame["sent"] >= app.start) & (frame["sent"] <= app.end)
    return frame[["t_s", "rtt_s", "upload"]]


def _steady(t_s: pd.Series, peak_s: float) -> pd.Series:
    """Which of the upload's probes fall in its steady part: the second half, less the last
    ``peak_s`` (a full queue's round trip), in which the queue drains after the last byte was sent."""
    if not len(t_s):
        return t_s.astype(bool)
    end = float(t_s.max())
    stop = end - peak_s if math.isfinite(peak_s) and end - peak_s > end / 2 else end
    return (t_s >= end / 2) & (t_s <= stop)


def _interval_medians(on: pd.DataFrame, width_s: float = CODEL_INTERVAL_S) -> pd.Series:
    """At each answered probe, the median round trip of the answered probes sent in the
    ``width_s`` up to it: one late probe does not make a peak."""
    answered = on.dropna(subset=["rtt_s"])
    series = pd.Series(answered["rtt_s"].to_numpy(), index=pd.to_timedelta(answered["t_s"].to_numpy(), unit="s"))
    return series.rolling(pd.Timedelta(seconds=width_s)).median()


class ProbeView:
    """What the probe saw in one run, in seconds.

    ``base``: the median round trip before the upload (the path without it); ``floor``: the
    lowest of those; ``spread``: how far they spread (95th less 5th percentile: the emulation's
    and the kernel's own noise); ``peak``: the highest median of an interval (100 ms) beside the
    upload, the queue at its fullest; ``lost``: the share of the probes sent beside the upload
    that never came back.

    ``delays`` are the answered probes' waits in the queue (round trip less ``base``) over the
    upload's steady part: its second half, less its last ``peak``, in which the queue drains
    once the sender has sent its last byte. ``standing`` is the least any of them waited, against
    the least before the upload (``floor``), 0 at least: the queue that never drained (a queue
    only adds delay, so the lowest round trip is the queue's floor; CoDel reads a queue the same way)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        alone = frame.loc[~frame["upload"] & (frame["t_s"] < 0), "rtt_s"].dropna()
        on = frame[frame["upload"]]
        self.base = float(alone.median()) if len(alone) else math.nan
        self.floor = float(alone.min()) if len(alone) else math.nan
        self.spread = float(alone.quantile(0.95) - alone.quantile(0.05)) if len(alone) > 1 else math.nan
        self.peak = float(_interval_medians(on).max()) if on["rtt_s"].notna().any() else math.nan
        self.lost = float(on["rtt_s"].isna().mean()) if len(on) else math.nan
        steady = on.loc[_steady(on["t_s"], self.peak), "rtt_s"].dropna()
        self.delays = (steady - self.base).to_numpy()
        # A queue only adds delay: a probe a little faster than the fastest alone (the probe's
        # own noise, a tenth of a millisecond) is no queue, not a negative one.
        self.standing = max(0.0, float(steady.min()) - self.floor) if len(steady) else math.nan

    @property
    def peak_delay(self) -> float:
        """The queue at its fullest, as the probe waited in it."""
        return self.peak - self.base

    @property
    def median_delay(self) -> float:
        """What the probe waited in the queue, typically, over the upload's second half."""
        return float(np.median(self.delays)) if len(self.delays) else math.nan

    def queue_bytes(self, rate_bps: float) -> float:
        """The standing queue in bytes: a FIFO drains at the line's rate."""
        return self.standing * rate_bps / 8


def view(trial: Any) -> ProbeView:
    return ProbeView(probe_frame(trial))


def delay_frame(views: Mapping[str, ProbeView]) -> pd.DataFrame:
    """The queueing delay (round trip less the run's base, ms) of every probe answered in the
    upload's second half, one row per probe, ``fix`` naming its run: a figure's data."""
    rows = [pd.DataFrame({"fix": fix, "delay ms": 1e3 * seen.delays}) for fix, seen in views.items()]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["fix", "delay ms"])


def median_of(views: Sequence[ProbeView], reading: str) -> float:
    """The median of one reading (``peak_delay``, ``standing``, …) over a variant's repetitions."""
    return float(np.median([getattr(v, reading) for v in views]))


#: Readings of a FIFO at its fullest. tbf's FIFO counts bytes and refuses the next full-sized
#: packet with up to one packet's room left, so "full" is anywhere from its size less one packet
#: to its size (the page's "tbf counts bytes"): one packet's time more in such a reading's margin.
#: Without it, the deep FIFO's peak (205.3-205.9 ms against 209.7, 1.6-1.8 packets under, host
#: 6.18, a quiet and a busy machine) stayed inside the two packets' margin by under a millisecond.
FULL_READINGS = frozenset({"peak_delay"})


def margin(views: Sequence[ProbeView], reading: str, frame_s: float) -> float:
    """A check's margin for ``reading``: two packets' time at the rate (one on the line, one a
    queue's grain), a third for a reading of the FIFO at its fullest (:data:`FULL_READINGS`), and
    the probe's own spread before the upload, or twice the standard deviation of the reading over
    the repetitions where the variant ran more than once (:func:`spread_tolerance`)."""
    packets = 3 if reading in FULL_READINGS else 2
    floor = packets * frame_s + max(v.spread for v in views)
    return spread_tolerance(floor, [getattr(v, reading) for v in views])


def spread_tolerance(floor_s: float, repeated: Sequence[float]) -> float:
    """A check's margin: ``floor_s`` (what theory leaves open: a frame in service, the probe's
    own noise), or twice the standard deviation of the repetitions where a variant ran more
    than once, whichever is larger."""
    if len(repeated) > 1:
        return max(floor_s, 2 * statistics.stdev(repeated))
    return floor_s


# --- tables -------------------------------------------------------------------------------------------

def kernel_table(names: Mapping[str, str], aqms: Mapping[str, Sequence[str]], runs_on: Mapping[str, Sequence[str]],
                 word: Any) -> pd.DataFrame:
    """One row per lab kernel: the AQM qdiscs it has (asked of the kernel itself) and the runs
    of this page it makes; kernel facts, no measurement."""
    rows = [{"kernel": names[k], "its AQMs": ", ".join(aqms[k]) or "none",
             "runs here": "; ".join(word.cell(fix) for fix, on in runs_on.items() if k in on) or "none"} for k in names]
    return pd.DataFrame(rows).set_index("kernel")


def results_table(trials: Mapping[str, Sequence[Any]], views: Mapping[str, Sequence[ProbeView]],
                  rate_bps: float) -> pd.DataFrame:
    """One row per run: what the probe saw and what the upload moved."""
    rows = []
    for name, runs in trials.items():
        for number, (trial, seen) in enumerate(zip(runs, views[name]), 1):
            rows.append({"run": name if len(runs) == 1 else f"{name} #{number}",
                         "probe alone ms": 1e3 * seen.base, "probe peak ms": 1e3 * seen.peak,
                         "standing queue ms": 1e3 * seen.standing, "standing queue KB": seen.queue_bytes(rate_bps) / 1024,
                         "probes lost %": 100 * seen.lost, "upload Mbit/s": trial.goodput_bps / 1e6})
    return pd.DataFrame(rows).set_index("run")


# --- figures --------------------------------------------------------------------------------------------

def probe_figure(frame: pd.DataFrame, rtt_s: float, full_s: float, title: str, word: Any):
    """The probe's round trips over time, before the upload (the path alone, grey) and beside it
    (blue), against the configured round trip and the one a full queue predicts: one point,
    the upload adds the whole queue to every other flow's round trip."""
    import matplotlib.pyplot as plt

    from tcplab.plots import PALETTE, legend, tidy, use_house_style

    use_house_style()
    fig, ax = plt.subplots(figsize=(8, 3.0))
    for upload, colour, key in ((False, PALETTE["configured"], "alone"), (True, PALETTE["measured"], "beside")):
        part = frame[frame["upload"] == upload]
        ax.plot(part["t_s"], 1e3 * part["rtt_s"], ".", markersize=3, color=colour, gid=key,
                label=word(f"plot.12-bufferbloat.{key}"))
    ax.axhline(1e3 * rtt_s, linestyle="--", color=PALETTE["configured"], gid="configured",
               label=word("plot.12-bufferbloat.configured"))
    ax.axhline(1e3 * (rtt_s + full_s), linestyle=":", color=PALETTE["predicted"], gid="predicted",
               label=word("plot.12-bufferbloat.full"))
    ax.set(xlabel=word("plot.12-bufferbloat.since_upload"), ylabel=word("plot.round_trip"),
           title=title)
    ax.set_ylim(bottom=0)
    legend(ax)
    tidy(fig)
    return fig


def delay_figure(delays: pd.DataFrame, predicted_s: Mapping[str, float], word: Any):
    """The probe's queueing delay beside each fix's upload (its second half), one row per run,
    with what theory predicts for it (◆): one point, how much of the wait each fix removes."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from tcplab.plots import PALETTE, legend, tidy, use_house_style

    use_house_style()
    order = list(dict.fromkeys(delays["fix"]))
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.55 * len(order)))
    sns.boxplot(data=delays, x="delay ms", y="fix", order=order, color=PALETTE["measured"], fliersize=1.5,
                width=0.5, ax=ax)
    ys = [order.index(fix) for fix in predicted_s if fix in order]
    xs = [1e3 * predicted_s[fix] for fix in predicted_s if fix in order]
    ax.scatter(xs, ys, marker="D", color="black", zorder=3, gid="predicted", label=word("plot.12-bufferbloat.predicted"))
    ax.set(xlabel=word("plot.12-bufferbloat.delay"), ylabel="", title=word("plot.12-bufferbloat.delay_title"))
    ax.set_xlim(left=0)
    legend(ax)
    tidy(fig)
    return fig
