"""The house style of every tcplab figure, and the figures themselves.

Flow figures read a :class:`~tcplab.analysis.packets.PacketTable` (or its ``packets``
DataFrame) and speak tcptrace/Wireshark's language: a time-sequence graph (Stevens style),
goodput over time, bytes in flight against the windows, round-trip samples. Sweep figures
read a tidy DataFrame with one row per run. Every figure function draws into ``ax`` when
given (and returns it), otherwise makes a figure in the house style and returns the
Figure; none calls ``plt.show()``. Artists carry a ``gid`` naming what they show
(``"ack"``, ``"window"``, ``"retransmission"``...), so tests and notebooks can find them in
any language. Legend and axis words are looked up in the report's strings
(``plot.*`` keys), English below being the fallback, in the ``language`` a figure function is
given (None: ``$TCPLAB_LANG``, else English; :func:`tcplab.words.default_language`).
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator, NullFormatter

from .analysis.metrics import goodput_series
from .analysis.table import expert_column, flow_view
from .units import ParameterError, format_duration
from .words import Messages, messages

#: Colours by role, the same in every figure: what was configured or predicted is grey.
PALETTE = {"configured": "#9e9e9e", "predicted": "#9e9e9e", "measured": "#1f77b4",
           "data": "#1f77b4", "ack": "#2ca02c", "window": "#ff7f0e", "retransmission": "#d62728",
           "zero_window": "#9467bd", "stall": "#8c564b", "window_full": "#e377c2",
           "inflight": "#1f77b4", "cwnd": "#17becf", "sndbuf": "#bcbd22"}


def use_house_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95,
                  rc={"figure.figsize": (8, 3.6), "figure.dpi": 110, "savefig.dpi": 150,
                      "axes.titleweight": "bold", "axes.titlesize": 11,
                      "font.family": ["DejaVu Sans", "Noto Sans CJK SC", "sans-serif"]})


def configured_vs_measured(rows: Iterable[dict], *, title: str | None = None, language: str | None = None):
    """One small panel per quantity: a grey bar for the target, a blue one for the measurement;
    quantities, bars and title in the page's language (``cell.*``, ``column.*``)."""
    use_house_style()
    word = messages(language)
    frame = pd.DataFrame(list(rows))
    long = frame.melt(id_vars=["quantity", "unit"], value_vars=["configured", "measured"],
                      var_name="kind", value_name="value").dropna(subset=["value"])
    quantities = list(frame["quantity"])
    fig, axes = plt.subplots(1, len(quantities), figsize=(3.2 * len(quantities), 3.2), squeeze=False)
    for ax, quantity in zip(axes[0], quantities):
        part = long[long["quantity"] == quantity]
        sns.barplot(data=part, x="kind", y="value", hue="kind", palette=PALETTE, ax=ax, legend=False)
        unit = part["unit"].iloc[0] if len(part) else ""
        ax.set_title(word.cell(quantity), fontsize=9)
        ax.set_xticks(ax.get_xticks(), [word.column(label.get_text()) for label in ax.get_xticklabels()])
        ax.set_xlabel("")
        ax.set_ylabel(unit)
        for bar, value in zip(ax.patches, part["value"]):
            ax.annotate(f"{value:.3g}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
    fig.suptitle(title or word("plot.configured_vs_measured"))
    fig.tight_layout()
    return fig


def rtt_samples(samples_s: Iterable[float], configured_s: float, *, title: str | None = None,
                language: str | None = None):
    """Distribution of measured round trips against the configured value."""
    use_house_style()
    word = messages(language)
    ms = pd.Series([s * 1e3 for s in samples_s], name=word("plot.round_trip"))
    fig, ax = plt.subplots(figsize=(8, 2.8))
    sns.histplot(ms, bins=30, color=PALETTE["measured"], ax=ax)
    ax.axvline(configured_s * 1e3, color=PALETTE["configured"], linestyle="--", label=word.column("configured"))
    ax.set_ylabel(word("plot.count"))
    ax.legend()
    ax.set_title(title or word("plot.round_trips_over_tcp"))
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- words


def _title(word: Messages, key: str, packets, flow: int, t_range: tuple[float, float] | None = None) -> str:
    """A flow plot's title: the flow's number where the capture holds more than one, the span
    of time it zooms on where it shows part of the flow, and the variant it shows when the table
    is named (a trial's)."""
    title = word(key)
    if getattr(packets, "packets", packets)["flow"].nunique() > 1:
        title = word("plot.title.of_flow", title=title, flow=flow)
    if t_range is not None:
        title = word("plot.title.of_range", title=title, start=format_duration(t_range[0]),
                     end=format_duration(t_range[1]))
    name = getattr(packets, "name", "")
    return word("plot.title.of_variant", variant=name, title=title) if name else title


# ---------------------------------------------------------------- columns and ranges


def _check_range(t_range) -> tuple[float, float] | None:
    if t_range is None:
        return None
    try:
        start, end = (float(x) for x in t_range)
    except (TypeError, ValueError):
        raise ParameterError("t_range", t_range, "(start, end) in seconds since the capture began") from None
    if not (np.isfinite(start) and np.isfinite(end) and end > start):
        raise ParameterError("t_range", t_range, "(start, end) in seconds with end after start", "empty range")
    return start, end


def _within(frame: pd.DataFrame, t_range, *, keep_previous: bool = False) -> pd.DataFrame:
    """Rows inside the time range; ``keep_previous`` keeps the row before it, so a step
    line already has its value at the left edge."""
    if t_range is None:
        return frame
    t = frame["rel_time"].to_numpy()
    inside = (t >= t_range[0]) & (t <= t_range[1])
    if keep_previous:
        before = np.flatnonzero(t < t_range[0])
        if before.size:
            inside[before[-1]] = True
    return frame[inside]


# ---------------------------------------------------------------- axes and units


def _new_axes(ax, figsize=None):
    """(figure to return or None, axes): a house-style figure only when the caller gave no axes."""
    if ax is not None:
        return None, ax
    use_house_style()
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax


def _finish(fig, ax):
    if fig is None:
        return ax
    fig.tight_layout()
    return fig


def _binary_unit(largest: float) -> tuple[str, int]:
    """KB/MB as in the kernel's buffer sysctls (powers of 1024)."""
    for unit, scale in (("MB", 1024**2), ("KB", 1024)):
        if largest >= 10 * scale:
            return unit, scale
    return "B", 1


class _ScaledLocator(MaxNLocator):
    """Round ticks in the shown unit (every 20 KB, not every 20000 bytes)."""

    def __init__(self, scale: int) -> None:
        super().__init__(nbins="auto", steps=[1, 2, 2.5, 5, 10])
        self.scale = scale

    def tick_values(self, vmin, vmax):
        return super().tick_values(vmin / self.scale, vmax / self.scale) * self.scale


def _bytes_axis(ax, largest: float, label_key: str, word: Messages) -> None:
    """Keep the data in bytes (artists carry the real numbers); show KB or MB on the axis."""
    unit, scale = _binary_unit(largest)
    ax.yaxis.set_major_locator(_ScaledLocator(scale))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / scale:g}"))
    ax.set_ylabel(word(label_key, unit=unit))


def byte_axis(ax, *, language: str | None = None) -> None:
    """Label the y axis of ``ax``, whose lines are drawn in bytes, in B, KB or MB as the
    largest value needs (not "1e6" above an axis of bytes); call it after drawing."""
    tops = [np.nanmax(np.asarray(line.get_ydata(), dtype=float)) for line in ax.get_lines() if len(line.get_ydata())]
    ax.set_ylim(bottom=0)  # a byte count is never negative: no tick below the axis's zero
    _bytes_axis(ax, max(tops, default=0.0), "plot.bytes", messages(language))


def _legend(ax) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        shown = ax.get_legend()
        title = shown.get_title().get_text() if shown is not None else ""
        ax.legend(handles, labels, loc="best", fontsize=8, framealpha=0.85, title=title or None)


# ---------------------------------------------------------------- flow figures


def _stall_threshold(acks: pd.DataFrame) -> float:
    """Sender silences longer than two round trips (5 ms at least) are stalls; 200 ms
    when the capture has no RTT sample."""
    samples = expert_column(acks, "ack_rtt", np.nan).dropna()
    if samples.empty:
        return 0.2
    return max(2 * float(samples.median()), 0.005)


def first_seconds(packets, seconds: float, flow: int | None = None) -> tuple[float, float]:
    """``t_range`` of the first ``seconds`` of a flow's data, from its first data segment:
    a window taken from the data, not from the capture's start (which can be far earlier
    when the machine was slow to start the transfer)."""
    if not seconds > 0:
        raise ValueError(f"seconds must be above 0, got {seconds!r}")
    view, flow, direction = flow_view(packets, flow)
    start = float(view.loc[(view["dir"] == direction) & (view["len"] > 0), "rel_time"].min())
    return start, start + seconds


def time_sequence(packets, flow: int | None = None, *, t_range=None, ax=None, direction: int | None = None,
                  stall_s: float | None = None, language: str | None = None):
    """Stevens/tcptrace time-sequence graph of one flow's data direction.

    Each data segment is a vertical bar from ``seq`` to ``seq + len``; the peer's ACKs are
    a step line, and the right edge of its receive window (ACK + window) another.
    Retransmissions (x), zero windows (v), segments that fill the window (^) are marked,
    and sender silences longer than ``stall_s`` (default: two round trips) are shaded.
    ``t_range=(start, end)`` zooms in, in seconds since the capture began (``rel_time``).
    The y axis is the relative sequence number (bytes, labelled in KB/MB).
    """
    word = messages(language)
    t_range = _check_range(t_range)
    view, flow, direction = flow_view(packets, flow, direction)
    data_all = view[(view["dir"] == direction) & (view["len"] > 0)]
    acks_all = view[(view["dir"] != direction) & view["f_ack"]]
    data = _within(data_all, t_range)
    acks = _within(acks_all, t_range, keep_previous=True)
    if data.empty and acks.empty:
        raise ValueError(word("plot.missing.range", flow=flow, start=t_range[0], end=t_range[1]))
    fig, ax = _new_axes(ax)

    t, seq, end = data["rel_time"], data["seq"], data["seq"] + data["len"]
    if len(data):
        # On top of the ACK and window lines and the marks: the data is what the graph is read
        # for, and a window-limited sender's segments sit right on its window edge.
        ax.vlines(t, seq, end, colors=PALETTE["data"], linewidth=1.2, label=word("plot.data"), gid="data", zorder=4)
    if len(acks):
        ax.step(acks["rel_time"], acks["ack"], where="post", color=PALETTE["ack"], linewidth=1,
                label=word("plot.ack"), gid="ack")
        known = acks[acks["win"] >= 0]
        if len(known):
            ax.step(known["rel_time"], known["ack"] + known["win"], where="post", color=PALETTE["window"],
                    linewidth=1, label=word("plot.window"), gid="window")
    marks = (
        (data[expert_column(data, "retransmission", False)], "seq", "x", "retransmission"),
        (data[expert_column(data, "window_full", False)], "end", "^", "window_full"),
        (acks[expert_column(acks, "zero_window", False)], "ack", "v", "zero_window"),
    )
    shown_span = (t_range[1] - t_range[0]) if t_range is not None else float(np.ptp(data["rel_time"])) if len(data) else 0.0
    for rows, where, marker, role in marks:
        if len(rows):
            y = rows["seq"] + rows["len"] if where == "end" else rows[where]
            ax.scatter(rows["rel_time"], y, marker=marker, s=_mark_area(ax, rows["rel_time"], shown_span),
                       color=PALETTE[role], zorder=3, label=word(f"plot.{role}"), gid=role)
    _shade_stalls(ax, data, stall_s if stall_s is not None else _stall_threshold(acks_all), word)

    if t_range is not None:
        ax.set_xlim(*t_range)
    tops = pd.concat([end, acks["ack"]]) if len(acks) else end
    _bytes_axis(ax, float(tops.max()) if len(tops) else 0.0, "plot.sequence", word)
    ax.set_xlabel(word("plot.time"))
    ax.set_title(_title(word, "plot.title.time_sequence", packets, flow, t_range))
    _legend(ax)
    return _finish(fig, ax)


#: A mark's area in points² (matplotlib's ``s``): full size, and the least it shrinks to.
MARK_AREA, MARK_AREA_MIN = 36.0, 9.0


def _mark_area(ax, times: pd.Series, span_s: float) -> float:
    """The area for one kind of mark: full size, or as small as keeps the typical neighbours
    (the median gap between marks, on the page) from covering each other. A window-limited
    sender fills the window with every second segment, and its marks come in bursts."""
    gaps = np.diff(np.sort(times.to_numpy(dtype=float)))
    if gaps.size == 0 or span_s <= 0:
        return MARK_AREA
    width_pt = ax.get_position().width * ax.figure.get_figwidth() * 72
    gap_pt = float(np.median(gaps)) / span_s * width_pt
    return float(np.clip(gap_pt ** 2, MARK_AREA_MIN, MARK_AREA))


def _shade_stalls(ax, data: pd.DataFrame, stall_s: float, word: Messages) -> None:
    times = data["rel_time"].to_numpy()
    if times.size < 2:
        return
    gaps = np.flatnonzero(np.diff(times) > stall_s)
    for k, i in enumerate(gaps):
        ax.axvspan(times[i], times[i + 1], color=PALETTE["stall"], alpha=0.15, linewidth=0,
                   label=word("plot.stall") if k == 0 else None, gid="stall")


def throughput(packets, flow: int | None = None, *, bin_s: float | None = None, ax=None,
               reference_bps: float | None = None, direction: int | None = None, language: str | None = None):
    """Goodput over time (bit/s per ``bin_s`` bin, see :func:`~.analysis.metrics.goodput_series`), with an
    optional dashed line at a predicted value ``reference_bps``."""
    word = messages(language)
    series = goodput_series(packets, flow, bin_s=bin_s, direction=direction)
    _, flow, _ = flow_view(packets, flow, direction)
    fig, ax = _new_axes(ax)
    x = np.append(series.index.to_numpy(), series.index[-1] + series.attrs["bin_s"])
    y = np.append(series.to_numpy(), series.iloc[-1])
    ax.step(x, y, where="post", color=PALETTE["measured"], label=word("plot.goodput_line"), gid="goodput")
    ax.fill_between(x, y, step="post", color=PALETTE["measured"], alpha=0.15, linewidth=0)
    if reference_bps is not None:
        ax.axhline(reference_bps, color=PALETTE["predicted"], linestyle="--", label=word("plot.reference"),
                   gid="reference")
    ax.yaxis.set_major_formatter(EngFormatter(unit="bit/s"))
    ax.set_ylabel(word("plot.goodput"))
    ax.set_xlabel(word("plot.time"))
    ax.set_ylim(bottom=0)
    ax.set_title(_title(word, "plot.title.throughput", packets, flow))
    _legend(ax)
    return _finish(fig, ax)


def _sender_telemetry(telemetry: pd.DataFrame, direction: int) -> pd.DataFrame:
    """The sender's established socket rows of an ``ss`` table (:mod:`tcplab.observe.ss`)."""
    rows = telemetry
    side = "client" if direction == 0 else "server"
    if "side" in rows.columns and (rows["side"] == side).any():
        rows = rows[rows["side"] == side]
    if "state" in rows.columns and (rows["state"] == "ESTAB").any():
        rows = rows[rows["state"] == "ESTAB"]
    return rows.sort_values("time")


def window_and_inflight(packets, flow: int | None = None, *, telemetry: pd.DataFrame | None = None, ax=None,
                        direction: int | None = None, language: str | None = None):
    """Bytes in flight (Wireshark's ``bytes_in_flight``) and the peer's advertised window,
    plus, from ``ss`` telemetry if given, the sender's cwnd x MSS, send-buffer use
    (skmem ``w``) and size (skmem ``tb``). Telemetry ``time`` is epoch seconds, aligned with
    the packets' ``time``."""
    word = messages(language)
    view, flow, direction = flow_view(packets, flow, direction)
    data = view[(view["dir"] == direction) & (expert_column(view, "bytes_in_flight", -1) >= 0)]
    acks = view[(view["dir"] != direction) & view["f_ack"] & (view["win"] >= 0)]
    if data.empty and acks.empty:
        raise ValueError(word("plot.missing.window", flow=flow))
    fig, ax = _new_axes(ax)
    largest = 0.0
    if len(data):
        ax.step(data["rel_time"], data["bytes_in_flight"], where="post", color=PALETTE["inflight"],
                label=word("plot.bytes_in_flight"), gid="bytes_in_flight")
        largest = max(largest, float(data["bytes_in_flight"].max()))
    if len(acks):
        ax.step(acks["rel_time"], acks["win"], where="post", color=PALETTE["window"],
                label=word("plot.advertised_window"), gid="advertised_window")
        largest = max(largest, float(acks["win"].max()))
    if telemetry is not None and len(telemetry):
        offset = float((view["time"] - view["rel_time"]).iloc[0])
        rows = _sender_telemetry(telemetry, direction)
        t = rows["time"] - offset
        lines = (("cwnd", rows.get("cwnd", np.nan) * rows.get("mss", np.nan), "-", PALETTE["cwnd"]),
                 ("sndbuf_used", rows.get("skmem_w"), ":", PALETTE["sndbuf"]),
                 ("sndbuf", rows.get("skmem_tb"), "--", PALETTE["sndbuf"]))
        for role, values, style, colour in lines:
            if values is None or not np.isfinite(np.asarray(values, float)).any():
                continue
            ax.step(t, values, where="post", linestyle=style, color=colour, label=word(f"plot.{role}"), gid=role)
            largest = max(largest, float(np.nanmax(np.asarray(values, float))))
    _bytes_axis(ax, largest, "plot.bytes", word)
    ax.set_xlabel(word("plot.time"))
    ax.set_ylim(bottom=0)
    ax.set_title(_title(word, "plot.title.window", packets, flow))
    _legend(ax)
    return _finish(fig, ax)


def rtt(packets, flow: int | None = None, *, ax=None, direction: int | None = None, language: str | None = None):
    """Wireshark's ``ack_rtt`` samples of the data direction over time, in ms."""
    word = messages(language)
    view, flow, direction = flow_view(packets, flow, direction)
    acks = view[view["dir"] != direction]
    samples = acks[expert_column(acks, "ack_rtt", np.nan).notna()]
    if samples.empty:
        raise ValueError(word("plot.missing.rtt", flow=flow))
    fig, ax = _new_axes(ax)
    ax.scatter(samples["rel_time"], samples["ack_rtt"] * 1e3, s=10, color=PALETTE["measured"],
               label=word("plot.rtt"), gid="rtt")
    ax.set_xlabel(word("plot.time"))
    ax.set_ylabel(word("plot.round_trip"))
    ax.set_ylim(bottom=0)
    ax.set_title(_title(word, "plot.title.rtt", packets, flow))
    _legend(ax)
    return _finish(fig, ax)


# ---------------------------------------------------------------- sweeps


def _require_columns(frame: pd.DataFrame, *names: str | None) -> None:
    if not isinstance(frame, pd.DataFrame) or frame.empty:
        raise ValueError("a sweep needs a non-empty DataFrame, one row per run")
    missing = [n for n in names if n is not None and n not in frame.columns]
    if missing:
        raise ValueError(f"sweep frame has no column {missing[0]!r} (columns: {', '.join(map(str, frame.columns))})")


def sweep_lines(frame: pd.DataFrame, x: str, y: str, hue: str | None = None, *, ax=None, logx: bool = False,
                logy: bool = False, language: str | None = None):
    """One line per ``hue`` value of the mean of ``y`` over repetitions at each ``x``, with
    its 95 % confidence band (seaborn ``errorbar=("ci", 95)``); ``logx``/``logy`` put an axis
    on a log scale, still labelled in plain numbers."""
    _require_columns(frame, x, y, hue)
    fig, ax = _new_axes(ax)
    sns.lineplot(data=frame, x=x, y=y, hue=hue, errorbar=("ci", 95), marker="o", ax=ax,
                 palette="colorblind" if hue is not None else None)
    # Axes and legend title named as a table heads the same columns (``column.*``), each line
    # as a table writes the value (``cell.*``: "off (client)" translated, a label kept).
    t = messages(language)
    ax.set_xlabel(t.column(x))
    ax.set_ylabel(t.column(y))
    for handle in ax.get_legend_handles_labels()[0]:
        handle.set_label(t.cell(handle.get_label()))
    if hue is not None:
        ax.legend(title=t.column(hue))
    if logx:
        plain_log_scale(ax, "x")
        values = np.sort(frame[x].dropna().unique())
        if len(values) <= 12:  # a sweep's own values read better than powers of ten
            ax.set_xticks(values)
            ax.xaxis.set_minor_formatter(NullFormatter())  # and only they are labelled
    if logy:
        plain_log_scale(ax, "y")
    return _finish(fig, ax)


def plain_log_scale(ax, axis: str = "y") -> None:
    """Put ``axis`` ("x" or "y") of ``ax`` on a log scale labelled in plain numbers: 1, 10,
    100000, not 10⁰, 10¹ or 1e5 (the house style has no scientific notation). The 2s and 5s
    between powers of ten are labelled too, so an axis spanning less than a decade or two still
    reads."""
    getattr(ax, f"set_{axis}scale")("log")
    target = getattr(ax, f"{axis}axis")
    target.set_major_formatter(FuncFormatter(_plain_number))
    target.set_minor_formatter(FuncFormatter(
        lambda v, pos: _plain_number(v, pos) if v > 0 and round(v / 10 ** np.floor(np.log10(v))) in (2, 5) else ""))


def _plain_number(value: float, _pos=None) -> str:
    return f"{value:.0f}" if value >= 1 else f"{value:.10f}".rstrip("0").rstrip(".")


def sweep_heatmap(frame: pd.DataFrame, x: str, y: str, value: str, *, ax=None, fmt: str = ".3g"):
    """Mean of ``value`` for every (``x``, ``y``) pair of a two-parameter sweep, annotated."""
    _require_columns(frame, x, y, value)
    table = frame.pivot_table(index=y, columns=x, values=value, aggfunc="mean").sort_index(ascending=False)
    fig, ax = _new_axes(ax)
    sns.heatmap(table, annot=True, fmt=fmt, cmap="viridis", ax=ax, cbar_kws={"label": value})
    return _finish(fig, ax)


def theory_curve(ax, xs: Sequence[float], predict: Callable[[float], float], *, label: str | None = None,
                 language: str | None = None):
    """Overlay a prediction, ``predict(x)`` for each x, as a dashed grey line on ``ax``."""
    xs = np.asarray(list(xs), dtype=float)
    ys = np.array([predict(x) for x in xs], dtype=float)
    line, = ax.plot(xs, ys, linestyle="--", color=PALETTE["predicted"], label=label or messages(language)("plot.theory"),
                    gid="theory")
    _legend(ax)
    return line
