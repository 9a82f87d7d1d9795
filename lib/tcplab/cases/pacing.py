"""Application rate limiting (case 10): the shape a throttled reader gives the wire.

Rates here are in **bytes per second** (what ``curl --limit-rate`` and a pacing reader are
given), unlike the rest of the library's bit/s.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .. import plots
from ..analysis.metrics import goodput_series
from ..analysis.table import flow_view
from ..observe.ss import socket_rows
from .trial import Trial

__all__ = ["BIN_S", "CURL_BOUNDED_LOOP", "UNTHROTTLED_SHARE", "libcurl_version", "read_unthrottled", "loop_outran_limit", "wire_rate", "wire_plot", "shape", "receiver_window", "data_segments", "recv_queue_peak", "last_backlog", "read_progress",
           "throttled_reads", "summary"]


#: The wire's rate is read in bins this long (seconds): short enough to show a burst that
#: fills a window, long enough to hold several segments of a trickle.
BIN_S = 0.1
#: libcurl checks --limit-rate only between loops of reads. Before 8.2.0 a loop went on while
#: its socket had data, up to 101 reads of its buffer (``readwrite_data`` in lib/transfer.c,
#: 7.88.1); from 8.2.0 (commit f4b5c88) a loop ends once it has read the limit's worth, and from
#: 8.6.0 (1da640a) a rate-limited transfer does not loop at all. A reader whose read takes longer
#: than the gap between arriving packets (a UML kernel's system calls) finds data waiting after
#: every read, so an older libcurl's loop can take the whole file without its limit.
CURL_BOUNDED_LOOP = (8, 2, 0)
#: A reading under this share of the throttle model's time: the reader ran unthrottled.
UNTHROTTLED_SHARE = 0.5


def wire_rate(trial: Trial, bin_s: float = BIN_S) -> pd.Series:
    """New payload on the wire per ``bin_s`` bin, in bytes per second, indexed by time (s)."""
    return goodput_series(trial.packets, bin_s=bin_s) / 8


def wire_plot(runs: list[tuple[Trial, float]], *, bin_s: float = BIN_S, language: str | None = None):
    """Payload on the wire in ``bin_s`` bins, a panel per (trial, target rate in B/s) with the
    target dashed, each over its connection's whole life (:func:`~tcplab.plots.flow_span`):
    a reader still reading after the last byte arrived shows empty bins there, where a panel
    of the data alone would show one bin for a transfer that fits in one. Returns the figure."""
    import matplotlib.pyplot as plt

    plots.use_house_style()
    fig, axes = plt.subplots(1, len(runs), figsize=(4.35 * len(runs), 3.4), squeeze=False)
    for ax, (trial, target) in zip(axes[0], runs):
        plots.throughput(trial.packets, bin_s=bin_s, reference_bps=8 * target, ax=ax,
                         t_range=plots.flow_span(trial.packets), language=language)
        ax.set_title(trial.label)
    plots.tidy(fig)
    return fig


def shape(trial: Trial, *, bin_s: float = BIN_S) -> dict[str, float]:
    """How the application's average rate was delivered on the wire.

    ``app_rate``: bytes the application read / its reading time (first to last read);
    ``peak``: the busiest ``bin_s`` bin on the wire; ``peak_over_app``: peak / app_rate
    (1 = perfectly smooth, large = bursts); ``busy_share``: the share of the application's
    reading time in which any new data crossed the wire.
    """
    series = wire_rate(trial, bin_s)
    app_rate = trial.goodput_bps / 8
    reading_bins = max(trial.duration_s / bin_s, 1.0)
    return {
        "app_rate": app_rate,
        "wire_time": float(len(series) * bin_s),
        "peak": float(series.max()),
        "peak_over_app": float(series.max() / app_rate),
        "busy_share": float(min((series > 0).sum() / reading_bins, 1.0)),
    }


def receiver_window(trial: Trial) -> pd.DataFrame:
    """The window the receiver advertised in each of its ACKs (bytes, scaled), with time."""
    view, _, direction = flow_view(trial.packets)
    acks = view[(view["dir"] != direction) & view["f_ack"] & (view["win"] >= 0) & ~view["f_syn"]]
    return acks[["rel_time", "win"]].reset_index(drop=True)


def data_segments(trial: Trial) -> pd.Series:
    """Payload sizes (bytes) of the data segments the sender put on the wire."""
    view, _, direction = flow_view(trial.packets)
    return view.loc[(view["dir"] == direction) & (view["len"] > 0), "len"].reset_index(drop=True)


def recv_queue_peak(trial: Trial, side: str = "client") -> float:
    """The most unread data (``ss`` Recv-Q) the receiving socket held, in bytes."""
    tel = trial.telemetry
    rows = socket_rows(tel, side, ("ESTAB", "CLOSE-WAIT"))
    return float(rows["recv_q"].max()) if len(rows) else float("nan")


def last_backlog(trial: Trial, side: str = "client") -> float:
    """Unread bytes (``ss`` Recv-Q) waiting in the receiving socket once the last byte had
    arrived: a reader that sleeps *after* each read (curl's throttle) reads them at once and
    never pays them back, because the transfer ends with that read."""
    rows = socket_rows(trial.telemetry, side, ("ESTAB", "CLOSE-WAIT"))
    if not len(rows) or rows["bytes_received"].isna().all():
        return float("nan")
    complete = rows[rows["bytes_received"] == rows["bytes_received"].max()]
    return float(complete["recv_q"].max())


def read_progress(trial: Trial, side: str = "client") -> pd.DataFrame:
    """The receiving socket over time, from ``ss``: ``t`` (s from the first sample), bytes
    ``received`` by the kernel, ``unread`` (Recv-Q) and ``read`` by the application."""
    rows = socket_rows(trial.telemetry, side, ("ESTAB", "CLOSE-WAIT")).dropna(subset=["bytes_received"])
    frame = pd.DataFrame({"t": rows["time"] - rows["time"].min(), "received": rows["bytes_received"],
                          "unread": rows["recv_q"], "read": rows["bytes_received"] - rows["recv_q"]})
    return frame.reset_index(drop=True)


def libcurl_version(trial: Trial) -> str | None:
    """The libcurl version curl reported for its download ("7.88.1"); None for runs recorded
    before the record kept it."""
    reported = ((trial.side_report(trial.receiver).get("extra") or {}).get("curl") or {}).get("curl_version") or ""
    found = re.match(r"libcurl/(\d+(?:\.\d+)*)", reported)
    return found.group(1) if found else None


def throttled_reads(trials: list[Trial], file_bytes: int, limit_Bps: float) -> pd.DataFrame:
    """One row per run of a reader that sleeps after each read (curl's ``--limit-rate``):
    its libcurl, the most it left unread, the backlog it read last (never slept for), its
    average against the limit, and its reading time against (file − last backlog) / limit."""
    rows = []
    for t in trials:
        backlog = last_backlog(t)
        rows.append({"kernel": t.kernel_name, "libcurl": libcurl_version(t),
                     "Recv-Q peak B": recv_queue_peak(t), "last backlog B": backlog,
                     "average / limit": t.goodput_bps / 8 / limit_Bps,
                     "reading s (predicted)": (file_bytes - backlog) / limit_Bps, "reading s": t.duration_s})
    return pd.DataFrame(rows).set_index("kernel")


def read_unthrottled(row: pd.Series) -> bool:
    """Whether a :func:`throttled_reads` row's reader ran unthrottled: it read in under
    :data:`UNTHROTTLED_SHARE` of the time (file − last backlog) / limit gives."""
    return bool(row["reading s"] < UNTHROTTLED_SHARE * row["reading s (predicted)"])


def loop_outran_limit(row: pd.Series) -> bool:
    """Whether a :func:`throttled_reads` row ran unthrottled with a libcurl whose read loop
    does not stop for its limit (before :data:`CURL_BOUNDED_LOOP`). A newer or unknown libcurl
    that ran unthrottled is not explained by it."""
    version = row.get("libcurl")
    if not version or not read_unthrottled(row):
        return False
    return tuple(int(part) for part in version.split(".")) < CURL_BOUNDED_LOOP


def summary(trials: list[Trial], *, bin_s: float = BIN_S) -> pd.DataFrame:
    """One row per trial: application rate, wire peak, burstiness, window and segment sizes."""
    rows = []
    for t in trials:
        s = shape(t, bin_s=bin_s)
        win = receiver_window(t)["win"]
        seg = data_segments(t)
        rows.append({"variant": t.label, "app rate B/s": s["app_rate"], "wire peak B/s": s["peak"],
                     "peak / app rate": s["peak_over_app"], "busy share": s["busy_share"],
                     "window min B": float(win.min()), "window max B": float(win.max()),
                     "zero windows": int((win == 0).sum()), "median segment B": float(np.median(seg)),
                     "Recv-Q peak B": recv_queue_peak(t)})
    return pd.DataFrame(rows).set_index("variant")
