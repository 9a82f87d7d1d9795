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

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.path import Path
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter
from matplotlib.transforms import Bbox

from .analysis.metrics import goodput_series
from .analysis.table import expert_column, flow_view
from .display import formatter
from .units import ParameterError, format_duration, format_size
from .words import Messages, messages

#: Colours by role, the same in every figure: what was configured or predicted is grey.
PALETTE = {"configured": "#9e9e9e", "predicted": "#9e9e9e", "measured": "#1f77b4",
           "data": "#1f77b4", "ack": "#2ca02c", "window": "#ff7f0e", "retransmission": "#d62728",
           "zero_window": "#9467bd", "stall": "#8c564b", "window_full": "#e377c2",
           "inflight": "#1f77b4", "cwnd": "#17becf", "sndbuf": "#bcbd22"}


#: How the page names its variants (:meth:`tcplab.report.page.CasePage.name`): the words of a figure
#: (titles, legends, tick labels) name a variant so, never by its label. None: as drawn.
_NAMES: Callable[[str], str] | None = None


def use_house_style(names: Callable[[str], str] | None = None) -> None:
    """The house style of every figure; ``names`` (a page's, once it sets the style): how its
    variants are named in the figures it shows."""
    global _NAMES
    if names is not None:
        _NAMES = names
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95,
                  rc={"figure.figsize": (8, 3.6), "figure.dpi": 110, "savefig.dpi": 150,
                      "axes.titleweight": "bold", "axes.titlesize": 11,
                      "font.family": ["DejaVu Sans", "Noto Sans CJK SC", "sans-serif"]})
    _describe_figures()


def describe(fig, *, language: str | None = None) -> str:
    """A figure in words for a reader who cannot see it, the alt text of its image: its title,
    then each panel's title and what it plots against what, in the words already on it."""
    word = messages(language)
    suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    panels = []
    for ax in fig.axes:
        title, x, y = ax.get_title(), ax.get_xlabel(), ax.get_ylabel()
        axes = word("plot.alt.against", y=y, x=x) if x and y else (y or x)
        if title and axes:
            panels.append(word("plot.alt.panel", title=title, axes=axes))
        elif title or axes:
            panels.append(title or axes)
    return word("plot.alt.separator").join(([suptitle] if suptitle else []) + panels)


def _describe_figures() -> None:
    """Have this IPython kernel show every figure's image with :func:`describe` as its alt text
    (nothing outside IPython). The inline backend installs its figure printer with the first
    figure; where none is open yet, it is loaded here (switching closes no figure then)."""
    png = formatter("image/png")
    if png is None:
        return
    from matplotlib.figure import Figure

    if Figure not in png.type_printers and not plt.get_fignums():
        plt.switch_backend(matplotlib.get_backend())
    printer = png.type_printers.get(Figure)
    if printer is None or getattr(printer, "tcplab_described", False):
        return

    def described(fig):
        if _NAMES is not None:
            _name_variants(fig, _NAMES)
        data = printer(fig)
        return (data, {"alt": describe(fig)}) if data else data

    described.tcplab_described = True
    png.for_type(Figure, described)


def _name_variants(fig, names: Callable[[str], str]) -> None:
    """The figure's words with each variant's label replaced by its name: titles, axis labels and
    legend entries, and tick labels (set again through their axis, whose formatter would draw the
    old ones)."""
    texts = [fig._suptitle] if getattr(fig, "_suptitle", None) is not None else []
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        legend = ax.get_legend()
        if legend is not None:
            texts += list(legend.get_texts()) + [legend.get_title()]
        for axis, ticks in ((ax.xaxis, ax.get_xticks()), (ax.yaxis, ax.get_yticks())):
            labels = [label.get_text() for label in axis.get_ticklabels()]
            named = [names(label) for label in labels]
            if named != labels and len(labels) == len(ticks):
                axis.set_ticks(ticks, named)
    for text in texts:
        if text is not None and text.get_text():
            named = names(text.get_text())
            if named != text.get_text():
                text.set_text(named)


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
    tidy(fig)
    return fig


def _binary_unit(largest: float) -> tuple[str, int]:
    """KB/MB as in the kernel's buffer sysctls (powers of 1024): the larger unit from two of
    it, so an axis to 3 MB reads 0 … 3, not 0 … 3000 KB, and one to 1.5 MB keeps whole KB."""
    for unit, scale in (("MB", 1024**2), ("KB", 1024)):
        if largest >= 2 * scale:
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


#: Where a legend may sit inside its axes, in the order tried.
LEGEND_LOCS = ("upper right", "upper left", "lower right", "lower left", "center right", "center left",
               "upper center", "lower center")
#: The most of the axes' height that room made above the data for a legend may take.
LEGEND_ROOM_MAX = 0.45
#: Points kept free around a legend, so that a line grazing its frame counts as hidden.
LEGEND_PAD_PT = 3.0


def _legend(ax) -> None:
    legend(ax)


def legend(ax):
    """Put the legend of ``ax`` where it hides no data: the first place inside the axes (one
    column, then two) where its box covers no line, mark, bar, band or text; else above the
    data, in room made by raising the top of a linear y axis (at most ``LEGEND_ROOM_MAX`` of
    its height); else outside, right of the axes. Call it after drawing everything; a figure
    whose layout changes afterwards (``tight_layout``) is settled by :func:`tidy`. Returns the
    legend, or None when nothing is labelled."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    shown = ax.get_legend()
    title = (shown.get_title().get_text() if shown is not None else "") or None
    _unmake_room(ax)
    ax._tcplab_legend = (handles, labels, title)
    return _place_legend(ax)


def tidy(fig) -> None:
    """``fig.tight_layout()``, then every legend drawn by :func:`legend` placed again for the
    final size of its axes (a smaller axes leaves less room between the lines)."""
    fig.tight_layout()
    moved = False
    for ax in fig.axes:
        if getattr(ax, "_tcplab_legend", None) is not None:
            _unmake_room(ax)  # and made again for the new size
            moved |= _place_legend(ax)._tcplab_outside
    if moved:
        fig.tight_layout()


def _renderer(fig):
    get = getattr(fig.canvas, "get_renderer", None)
    return get() if get is not None else fig._get_renderer()


def _place_legend(ax):
    handles, labels, title = ax._tcplab_legend
    fig = ax.figure
    renderer = _renderer(fig)
    options = dict(fontsize=8, framealpha=0.85, title=title)

    def place(loc, ncols, **where):
        shown = ax.legend(handles, labels, loc=loc, ncols=ncols, **options, **where)
        shown._tcplab_outside = bool(where)
        return shown

    columns = (1, 2) if len(handles) > 2 else (1,)
    pad = LEGEND_PAD_PT * _px_per_pt(ax)
    shapes = _shown_data(ax, renderer)
    for ncols in columns:
        for loc in LEGEND_LOCS:
            shown = place(loc, ncols)
            if not _hides(shapes, shown.get_window_extent(renderer), pad):
                return shown
    if ax.get_yscale() == "linear" and not ax.yaxis_inverted():
        for ncols in sorted({min(len(handles), 3), min(len(handles), 2), 1}, reverse=True):  # wide and low first
            for loc in ("upper right", "upper left", "upper center"):
                shown = place(loc, ncols)
                if _make_room(ax, shown.get_window_extent(renderer), renderer):
                    shown = place(loc, ncols)
                    if not _hides(_shown_data(ax, renderer), shown.get_window_extent(renderer), pad):
                        return shown
                    _unmake_room(ax)
    return place("upper left", 1, bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _make_room(ax, box, renderer) -> bool:
    """Raise the top of the y axis so that the data lies below ``box`` (a legend at the top of
    the axes); False where that would take more than ``LEGEND_ROOM_MAX`` of the height."""
    frame = ax.get_window_extent(renderer)
    share = (frame.y1 - box.y0 + 2 * LEGEND_PAD_PT * _px_per_pt(ax)) / frame.height
    if not 0 < share <= LEGEND_ROOM_MAX:
        return False
    top_px = _data_top(ax, renderer)
    if top_px is None:
        return False
    before = ax.get_ylim()
    data_top = ax.transData.inverted().transform((frame.x0, top_px))[1]
    ax.set_ylim(before[0], max(before[1], before[0] + (data_top - before[0]) / (1 - share)))
    ax._tcplab_room = (before, ax.get_ylim())
    return True


def _unmake_room(ax) -> None:
    """Give the y axis back the limits it had before :func:`_make_room` raised them (unless
    something set other limits since)."""
    room = getattr(ax, "_tcplab_room", None)
    if room is not None and tuple(ax.get_ylim()) == tuple(room[1]):
        ax.set_ylim(room[0])
    ax._tcplab_room = None


def _data_top(ax, renderer) -> float | None:
    """The highest point (display y) at which data shows inside the axes; what runs off the
    top (a line cut off on purpose) is left out."""
    frame = ax.get_window_extent(renderer)
    tops = []
    for kind, shape in _shown_data(ax, renderer):
        if kind == "box":
            points = np.array([[shape.x0, shape.y0], [shape.x1, shape.y1]])
        else:
            points = shape.vertices if kind != "points" else shape[:, :2]
        points = points[np.isfinite(points).all(axis=1)]
        inside = points[(points[:, 0] >= frame.x0) & (points[:, 0] <= frame.x1) & (points[:, 1] < frame.y1 - 0.5)]
        if len(inside):
            tops.append(float(inside[:, 1].max()))
    return max(tops) if tops else None


def _shown_data(ax, renderer) -> list[tuple[str, object]]:
    """What ``ax`` shows, in display coordinates: ("line", path), ("area", path) for filled
    shapes, ("points", [x, y, radius]) for marks, ("box", bbox) for bars and texts. Spans that
    shade the axes' whole height (a stall, a pause) are background, not data."""
    ax.get_xlim(), ax.get_ylim()  # settle the autoscaled limits the transforms use
    frame = ax.get_window_extent(renderer)
    shapes: list[tuple[str, object]] = []
    for line in ax.get_lines():
        if not line.get_visible() or len(line.get_xydata()) == 0:
            continue
        path = line.get_transform().transform_path(line.get_path())
        if line.get_linestyle() not in ("None", "", " ", "none"):
            shapes.append(("line", path))
        if line.get_marker() not in (None, "None", "", " ", "none"):
            radius = line.get_markersize() / 2 * _px_per_pt(ax)
            shapes.append(("points", np.column_stack([path.vertices, np.full(len(path.vertices), radius)])))
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        if isinstance(coll, PathCollection):
            offsets = coll.get_offset_transform().transform(coll.get_offsets())
            sizes = coll.get_sizes()
            radius = np.sqrt(sizes if len(sizes) else [36.0]) / 2 * _px_per_pt(ax)
            shapes.append(("points", np.column_stack([offsets, np.resize(radius, len(offsets))])))
            continue
        paths = [coll.get_transform().transform_path(p) for p in coll.get_paths()]
        if paths:
            kind = "line" if isinstance(coll, LineCollection) else "area"
            shapes.append((kind, Path.make_compound_path(*paths)))
    for patch in ax.patches:
        if patch.get_visible():
            box = patch.get_window_extent(renderer)
            if box.height < 0.98 * frame.height:
                shapes.append(("box", box))
    for text in ax.texts:
        if text.get_visible() and text.get_text():
            shapes.append(("box", text.get_window_extent(renderer)))
    return shapes


def _px_per_pt(ax) -> float:
    """Display pixels per typographic point in the figure of ``ax``."""
    return ax.figure.dpi / 72.0


def _hides(shapes, box, pad: float = 0.0) -> bool:
    """Whether a legend's ``box`` (display coordinates), grown by ``pad`` pixels, covers any of
    ``shapes``."""
    box = Bbox.from_extents(box.x0 - pad, box.y0 - pad, box.x1 + pad, box.y1 + pad)
    for kind, shape in shapes:
        if kind == "box":
            if box.overlaps(shape):
                return True
        elif kind == "points":
            x, y, r = shape[:, 0], shape[:, 1], shape[:, 2]
            if np.any((x + r >= box.x0) & (x - r <= box.x1) & (y + r >= box.y0) & (y - r <= box.y1)):
                return True
        elif shape.intersects_bbox(box, filled=(kind == "area")):
            return True
    return False


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
               reference_bps: float | None = None, direction: int | None = None, t_range=None,
               language: str | None = None):
    """Goodput over time (per ``bin_s`` bin, see :func:`~.analysis.metrics.goodput_series`), with an
    optional dashed line at a predicted value ``reference_bps`` (bit/s). The axis is in one unit,
    bit/s, kbit/s, Mbit/s or Gbit/s as the largest value needs, named in its label.
    ``t_range=(start, end)`` (``rel_time`` seconds) shows that span in bins of the same grid,
    empty where no new byte crossed: a zoom, or (with :func:`flow_span`) the connection's whole
    life, silent stretches after its data included. A span that leaves data out is named in the
    title."""
    word = messages(language)
    t_range = _check_range(t_range)
    series = goodput_series(packets, flow, bin_s=bin_s, direction=direction)
    view, flow, direction = flow_view(packets, flow, direction)
    step = series.attrs["bin_s"]
    starts, values = series.index.to_numpy(dtype=float), series.to_numpy(dtype=float)
    zoomed = None
    if t_range is not None:
        # The same bins (edges at the first data segment + k bins), as many as cover the span.
        first = np.floor((t_range[0] - starts[0]) / step + 1e-9)
        last = np.ceil((t_range[1] - starts[0]) / step - 1e-9)
        k = np.arange(int(first), max(int(last), int(first) + 1))
        filled = np.zeros(len(k))
        inside = (k >= 0) & (k < len(values))
        filled[inside] = values[k[inside]]
        starts, values = starts[0] + k * step, filled
        data = view.loc[(view["dir"] == direction) & (view["len"] > 0), "rel_time"]
        if float(data.min()) < t_range[0] or float(data.max()) > t_range[1]:
            zoomed = t_range
    unit, scale = _rate_unit(max(float(np.max(values)), float(reference_bps or 0.0)))
    fig, ax = _new_axes(ax)
    x = np.append(starts, starts[-1] + step)
    y = np.append(values, values[-1])
    ax.step(x, y, where="post", color=PALETTE["measured"], label=word("plot.goodput_line"), gid="goodput")
    ax.fill_between(x, y, step="post", color=PALETTE["measured"], alpha=0.15, linewidth=0)
    if reference_bps is not None:
        ax.axhline(reference_bps, color=PALETTE["predicted"], linestyle="--", label=word("plot.reference"),
                   gid="reference")
    # Data in bit/s (artists carry the real numbers); ticks and label in one unit.
    ax.yaxis.set_major_locator(_ScaledLocator(scale))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / scale:g}"))
    ax.set_ylabel(word("plot.goodput", unit=unit))
    ax.set_xlabel(word("plot.time"))
    ax.set_ylim(bottom=0)
    if t_range is not None:
        ax.set_xlim(*t_range)
    ax.set_title(_title(word, "plot.title.throughput", packets, flow, zoomed))
    _legend(ax)
    return _finish(fig, ax)


def _rate_unit(largest: float) -> tuple[str, float]:
    """bit/s, kbit/s, Mbit/s or Gbit/s (powers of 1000), the largest that ``largest`` reaches."""
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if largest >= scale:
            return unit, scale
    return "bit/s", 1.0


def flow_span(packets, flow: int | None = None) -> tuple[float, float]:
    """``t_range`` of a flow's whole life as its capture saw it: from its first packet (the
    handshake) to its last (the FIN and ACKs of a reader that went on reading after the last
    byte arrived)."""
    view, _, _ = flow_view(packets, flow)
    start, end = float(view["rel_time"].min()), float(view["rel_time"].max())
    return start, max(end, start + 1e-6)


def _sender_telemetry(telemetry: pd.DataFrame, direction: int) -> pd.DataFrame:
    """The sender's established socket rows of an ``ss`` table (:mod:`tcplab.observe.ss`)."""
    rows = telemetry
    side = "client" if direction == 0 else "server"
    if "side" in rows.columns and (rows["side"] == side).any():
        rows = rows[rows["side"] == side]
    if "state" in rows.columns and (rows["state"] == "ESTAB").any():
        rows = rows[rows["state"] == "ESTAB"]
    return rows.sort_values("time")


#: The advertised window is cut off at the top of the axis when it reaches more than this many
#: times the sender's own lines: then the event is the sender's, and a window far above it
#: would squash it to the bottom of the graph.
WINDOW_CUT = 2.0


def window_and_inflight(packets, flow: int | None = None, *, telemetry: pd.DataFrame | None = None, ax=None,
                        direction: int | None = None, language: str | None = None):
    """Bytes in flight (Wireshark's ``bytes_in_flight``) and the peer's advertised window,
    plus, from ``ss`` telemetry if given, the sender's cwnd x MSS, send-buffer use
    (skmem ``w``) and size (skmem ``tb``). Telemetry ``time`` is epoch seconds, aligned with
    the packets' ``time``. The y axis is sized to the sender's lines; an advertised window
    more than ``WINDOW_CUT`` times above them runs off its top, its legend entry saying how
    far it went."""
    word = messages(language)
    view, flow, direction = flow_view(packets, flow, direction)
    data = view[(view["dir"] == direction) & (expert_column(view, "bytes_in_flight", -1) >= 0)]
    acks = view[(view["dir"] != direction) & view["f_ack"] & (view["win"] >= 0)]
    if data.empty and acks.empty:
        raise ValueError(word("plot.missing.window", flow=flow))
    fig, ax = _new_axes(ax)
    sender_top = 0.0  # the largest of the sender's own lines
    if len(data):
        ax.step(data["rel_time"], data["bytes_in_flight"], where="post", color=PALETTE["inflight"],
                label=word("plot.bytes_in_flight"), gid="bytes_in_flight")
        sender_top = max(sender_top, float(data["bytes_in_flight"].max()))
    lines = ()
    if telemetry is not None and len(telemetry):
        offset = float((view["time"] - view["rel_time"]).iloc[0])
        rows = _sender_telemetry(telemetry, direction)
        t = rows["time"] - offset
        lines = (("cwnd", rows.get("cwnd", np.nan) * rows.get("mss", np.nan), "-", PALETTE["cwnd"]),
                 ("sndbuf_used", rows.get("skmem_w"), ":", PALETTE["sndbuf"]),
                 ("sndbuf", rows.get("skmem_tb"), "--", PALETTE["sndbuf"]))
        lines = tuple(line for line in lines if line[1] is not None and np.isfinite(np.asarray(line[1], float)).any())
        for _, values, _, _ in lines:
            sender_top = max(sender_top, float(np.nanmax(np.asarray(values, float))))
    window_top = float(acks["win"].max()) if len(acks) else 0.0
    cut = sender_top > 0 and window_top > WINDOW_CUT * sender_top
    if len(acks):
        label = (word("plot.advertised_window_cut", size=format_size(window_top)) if cut
                 else word("plot.advertised_window"))
        ax.step(acks["rel_time"], acks["win"], where="post", color=PALETTE["window"], label=label,
                gid="advertised_window")
    for role, values, style, colour in lines:
        ax.step(t, values, where="post", linestyle=style, color=colour, label=word(f"plot.{role}"), gid=role)
    top = sender_top if cut else max(sender_top, window_top)
    _bytes_axis(ax, top, "plot.bytes", word)
    ax.set_xlabel(word("plot.time"))
    ax.set_ylim(bottom=0)
    if cut:
        ax.set_ylim(top=1.08 * sender_top)
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


#: Marks of a sweep's lines, one per line (seaborn's filled markers), the first line's size in
#: points, how much smaller each next line's marks are, and the least size.
SWEEP_MARKERS = ["o", "X", "s", "P", "D", "^", "v", "p"]
SWEEP_MARK_SIZE, SWEEP_MARK_STEP, SWEEP_MARK_MIN = 9.0, 2.0, 4.5


def sweep_lines(frame: pd.DataFrame, x: str, y: str, hue: str | None = None, *, ax=None, logx: bool = False,
                logy: bool = False, language: str | None = None):
    """One line per ``hue`` value of the mean of ``y`` over repetitions at each ``x``, with
    its 95 % confidence band (seaborn ``errorbar=("ci", 95)``); ``logx``/``logy`` put an axis
    on a log scale, still labelled in plain numbers."""
    _require_columns(frame, x, y, hue)
    fig, ax = _new_axes(ax)
    if hue is None:
        sns.lineplot(data=frame, x=x, y=y, errorbar=("ci", 95), marker="o", ax=ax)
    else:
        # A mark of its own for each line, and each later line's marks smaller and on top, so
        # that two lines measured at the same point both show there.
        levels = list(pd.unique(frame[hue].dropna()))  # in order of appearance, numbers sorted (as seaborn)
        levels = sorted(levels) if pd.api.types.is_numeric_dtype(frame[hue]) else levels
        palette = dict(zip(levels, sns.color_palette("colorblind", len(levels))))
        sns.lineplot(data=frame, x=x, y=y, hue=hue, style=hue, hue_order=levels, style_order=levels,
                     markers=SWEEP_MARKERS[:len(levels)] if len(levels) <= len(SWEEP_MARKERS) else True,
                     dashes=False, errorbar=("ci", 95), palette=palette, ax=ax)
        sizes = {level: max(SWEEP_MARK_SIZE - SWEEP_MARK_STEP * i, SWEEP_MARK_MIN) for i, level in enumerate(levels)}
        by_colour = {tuple(np.round(colour, 6)): level for level, colour in palette.items()}
        for line in ax.get_lines():  # the lines, and the empty ones the legend is made of
            level = by_colour.get(tuple(np.round(matplotlib.colors.to_rgb(line.get_color()), 6)))
            if level is not None:
                line.set_markersize(sizes[level])
                line.set_zorder(2 + 0.01 * levels.index(level))
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
    if hue is not None:
        _legend(ax)
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
                    gid="theory", zorder=1.9)  # under the measured lines and their marks
    _legend(ax)
    return line
