"""The figures carry the data they claim to show: scripted captures with known ACKs,
retransmissions and windows, drawn and then read back from the artists."""

from __future__ import annotations

import os
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tcplab import plots  # noqa: E402
from tcplab.analysis import read_packets  # noqa: E402
from tcplab.analysis.metrics import goodput_series  # noqa: E402
from tcplab.units import ParameterError  # noqa: E402

from analysis.pcapgen import ACK, Conn, ethernet, write_pcap  # noqa: E402

T0 = 3000.0
MSS = 1448
WSCALE = 7


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def by_gid(ax, gid):
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    assert found, f"no artist with gid {gid!r}"
    return found


def write(path, frames):
    write_pcap(path, [(t, ethernet(p)) for t, p in frames], 1)
    return path


@pytest.fixture
def bulk(tmp_path):
    """Client sends 12 segments; the server ACKs every second one, segment 3 is resent at
    0.300 s after a silence, and the server once advertises a zero window."""
    c = Conn()
    frames = c.handshake(T0, rtt=0.010, ws=(WSCALE, WSCALE))
    t = T0 + 0.020
    for i in range(12):
        t = T0 + 0.020 + i * 0.002
        frames.append((t, c.send(0, ACK, MSS, win=502)))
        if i % 2:
            win = 0 if i == 7 else 400 + i
            frames.append((t + 0.010, c.send(1, ACK, win=win)))
    frames.append((T0 + 0.300, c.send(0, ACK, MSS, seq=c.isn[0] + 1 + 2 * MSS, win=502)))
    frames.append((T0 + 0.310, c.send(1, ACK, win=450)))
    # A second, smaller connection, which the default must not pick.
    small = Conn(client=("10.0.0.1", 40001), isn=(70000, 90000))
    frames += small.handshake(T0 + 0.001, rtt=0.002)
    frames.append((T0 + 0.004, small.send(0, ACK, 100)))
    frames.sort(key=lambda f: f[0])
    return read_packets(write(tmp_path / "bulk.pcap", frames))


def flow0(table):
    return table.packets[table.packets["flow"] == 0]


def test_time_sequence_draws_the_acks_windows_and_segments_of_the_capture(bulk, tmp_path):
    fig = plots.time_sequence(bulk)
    ax = fig.axes[0]
    p = flow0(bulk)
    acks = p[(p["dir"] == 1) & p["f_ack"]]
    ack_line, = by_gid(ax, "ack")
    assert ack_line.get_ydata().tolist() == acks["ack"].tolist()
    assert np.allclose(ack_line.get_xdata(), acks["rel_time"])
    window_line, = by_gid(ax, "window")
    known = acks[acks["win"] >= 0]
    assert window_line.get_ydata().tolist() == (known["ack"] + known["win"]).tolist()
    # The zero window shows as an edge equal to the ACK; the scale of 2^7 was applied.
    assert (known["win"] == 0).sum() == 1 and known["win"].iloc[-1] == 450 * 2**WSCALE
    data = p[(p["dir"] == 0) & (p["len"] > 0)]
    segments = by_gid(ax, "data")[0].get_segments()
    assert [(s[0][1], s[1][1]) for s in segments] == list(zip(data["seq"], data["seq"] + data["len"]))
    retrans, = by_gid(ax, "retransmission")
    assert retrans.get_offsets()[:, 1].tolist() == [1 + 2 * MSS]
    assert retrans.get_offsets()[0, 0] == pytest.approx(0.300)
    zero, = by_gid(ax, "zero_window")
    assert zero.get_offsets()[:, 0].tolist() == pytest.approx([0.020 + 7 * 0.002 + 0.010])
    # The silence from the last new segment (42 ms) to the resend (300 ms) is shaded.
    stalls = by_gid(ax, "stall")
    assert len(stalls) == 1
    span = stalls[0]
    assert (span.get_x(), span.get_x() + span.get_width()) == pytest.approx((0.020 + 11 * 0.002, 0.300))
    assert "KB" in ax.get_ylabel() and "(s)" in ax.get_xlabel()
    fig.savefig(tmp_path / "time_sequence.png")
    assert (tmp_path / "time_sequence.png").stat().st_size > 10_000


def test_marks_that_come_in_bursts_shrink_so_neighbours_do_not_cover_each_other():
    fig, ax = plt.subplots(figsize=(7, 3.4))
    lone = plots._mark_area(ax, pd.Series([0.1, 0.5, 0.9]), 1.0)  # far apart: full size
    bursts = plots._mark_area(ax, pd.Series([b + k * 0.0005 for b in (0.1, 0.5, 0.9) for k in range(6)]), 1.0)
    assert lone == plots.MARK_AREA and plots.MARK_AREA_MIN <= bursts < plots.MARK_AREA / 2
    zoomed = plots._mark_area(ax, pd.Series([b + k * 0.0005 for b in (0.1, 0.5, 0.9) for k in range(6)]), 0.02)
    assert zoomed == plots.MARK_AREA  # the same marks, zoomed in, stand apart again
    plt.close(fig)


def test_a_byte_axis_reads_in_kb_or_mb_without_an_offset():
    fig, ax = plt.subplots()
    ax.step([0, 1, 2], [0, 1.5e6, 3.4e6])
    plots.byte_axis(ax, language="en")
    fig.canvas.draw()
    assert ax.get_ylabel() in {"bytes (KB)", "bytes (MB)"} and ax.yaxis.get_offset_text().get_text() == ""
    ticks = [label.get_text() for label in ax.get_yticklabels() if label.get_text()]
    assert ticks and all(re.fullmatch(r"[\d.]+", tick) for tick in ticks), ticks
    plt.close(fig)


@pytest.mark.parametrize("largest, unit", [(1_500, "B"), (3_000, "KB"), (1.5 * 1024**2, "KB"), (3.2e6, "MB")])
def test_a_byte_axis_takes_the_larger_unit_from_two_of_it(largest, unit):
    fig, ax = plt.subplots()
    ax.step([0, 1], [0, largest])
    plots.byte_axis(ax, language="en")
    assert ax.get_ylabel() == f"bytes ({unit})"
    plt.close(fig)


def test_zoom_limits_the_time_axis_and_the_drawn_data(bulk):
    fig = plots.time_sequence(bulk.packets, t_range=(0.024, 0.030))
    ax = fig.axes[0]
    assert ax.get_xlim() == pytest.approx((0.024, 0.030))
    xs = [s[0][0] for s in by_gid(ax, "data")[0].get_segments()]
    assert xs and min(xs) >= 0.024 and max(xs) <= 0.030
    assert len(xs) == 4  # segments 2..5 leave at 24, 26, 28 and 30 ms
    # The ACK line starts from the last ACK before the zoom, so its level is right at 24 ms.
    ack_line, = by_gid(ax, "ack")
    assert ack_line.get_xdata()[0] < 0.024
    with pytest.raises(ParameterError, match="t_range"):
        plots.time_sequence(bulk, t_range=(0.03, 0.02))


def test_flow_and_direction_defaults_and_empty_flows(bulk, tmp_path):
    view, flow, direction = plots.flow_view(bulk)
    assert (flow, direction) == (0, 0)
    assert plots.flow_view(bulk, 1)[1:] == (1, 0)
    with pytest.raises(ValueError, match="flow 7 has no packets"):
        plots.time_sequence(bulk, flow=7)
    with pytest.raises(ValueError, match="no payload in direction 1"):
        plots.throughput(bulk, flow=1, direction=1)
    c = Conn()
    handshake_only = read_packets(write(tmp_path / "syn.pcap", c.handshake(T0)))
    for draw in (plots.time_sequence, plots.throughput, plots.window_and_inflight, plots.rtt):
        with pytest.raises(ValueError, match="no payload"):
            draw(handshake_only)


def test_throughput_counts_each_new_byte_once_and_shows_the_reference(bulk, tmp_path):
    series = goodput_series(bulk, bin_s=0.010)
    assert series.sum() * 0.010 / 8 == pytest.approx(12 * MSS)  # the resend is not goodput
    fig = plots.throughput(bulk, bin_s=0.010, reference_bps=5e6)
    ax = fig.axes[0]
    line, = by_gid(ax, "goodput")
    assert line.get_ydata()[:-1].tolist() == series.tolist()
    ref, = by_gid(ax, "reference")
    assert ref.get_ydata()[0] == 5e6
    with pytest.raises(ParameterError, match="bin_s"):
        plots.throughput(bulk, bin_s=0)
    fig.savefig(tmp_path / "throughput.png")


def test_window_and_inflight_aligns_telemetry_by_epoch_time(bulk):
    telemetry = pd.DataFrame({
        "time": [T0 + 0.025, T0 + 0.035, T0 + 0.025], "side": ["client", "client", "server"],
        "state": ["ESTAB"] * 3, "cwnd": [10, 14, 99], "mss": [MSS] * 3,
        "skmem_w": [20000, 30000, 1], "skmem_tb": [46080, 46080, 1]})
    fig = plots.window_and_inflight(bulk, telemetry=telemetry)
    ax = fig.axes[0]
    cwnd, = by_gid(ax, "cwnd")
    assert cwnd.get_xdata() == pytest.approx([0.025, 0.035])
    assert cwnd.get_ydata().tolist() == [10 * MSS, 14 * MSS]
    assert by_gid(ax, "sndbuf")[0].get_ydata().tolist() == [46080, 46080]
    p = flow0(bulk)
    sent = p[(p["dir"] == 0) & (p["bytes_in_flight"] >= 0)]
    assert by_gid(ax, "bytes_in_flight")[0].get_ydata().tolist() == sent["bytes_in_flight"].tolist()
    assert 0 in by_gid(ax, "advertised_window")[0].get_ydata()


def test_rtt_plots_the_ack_round_trips_in_milliseconds(bulk):
    fig = plots.rtt(bulk)
    dots, = by_gid(fig.axes[0], "rtt")
    p = flow0(bulk)
    samples = p.loc[(p["dir"] == 1) & p["ack_rtt"].notna(), "ack_rtt"]
    assert dots.get_offsets()[:, 1].tolist() == pytest.approx((samples * 1e3).tolist())
    assert 10.0 in np.round(dots.get_offsets()[:, 1], 6)  # ACK 10 ms after the segment it covers
    assert fig.axes[0].get_ylabel() == "round trip (ms)"


def test_a_figure_is_drawn_in_the_language_it_is_given_and_else_in_tcplab_lang(bulk, monkeypatch):
    """Issue 17: language= names a figure's words without touching the environment; None keeps
    what TCPLAB_LANG asks (English when unset)."""
    from tcplab.words import messages

    zh = messages("zh")
    monkeypatch.delenv("TCPLAB_LANG", raising=False)
    for draw, key in ((plots.time_sequence, "plot.title.time_sequence"), (plots.throughput, "plot.title.throughput"),
                      (plots.window_and_inflight, "plot.title.window"), (plots.rtt, "plot.title.rtt")):
        for language, word in (("zh", zh), (None, messages("en"))):
            assert draw(bulk, language=language).axes[0].get_title() == word("plot.title.of_flow", title=word(key), flow=0)
    assert "TCPLAB_LANG" not in os.environ
    monkeypatch.setenv("TCPLAB_LANG", "zh")
    assert plots.rtt(bulk).axes[0].get_ylabel() == zh("plot.round_trip")
    assert plots.rtt(bulk, language="en").axes[0].get_ylabel() == "round trip (ms)"
    frame = pd.DataFrame({"x": [1, 2], "goodput MB/s": [1.0, 2.0]})
    assert plots.sweep_lines(frame, "x", "goodput MB/s", language="en").axes[0].get_ylabel() == "goodput MB/s"
    with pytest.raises(ValueError, match="没有 ACK 往返时延样本"):
        plots.rtt(flow0(bulk).assign(ack_rtt=np.nan), language="zh")


def test_a_figure_is_described_in_the_words_on_it_for_its_alt_text():
    """The image's alt text says what the figure shows: its title, each panel's title and what
    it plots against what, in the figure's own words (so in the page's language)."""
    fig, (left, right) = plt.subplots(1, 2)
    fig.suptitle("Two runs")
    left.set(title="Goodput", xlabel="time (s)", ylabel="goodput (Mbit/s)")
    right.set(ylabel="bytes (KB)")
    assert plots.describe(fig, language="en") == "Two runs. Goodput: goodput (Mbit/s) against time (s). bytes (KB)"
    assert plots.describe(fig, language="zh") == "Two runs。Goodput：goodput (Mbit/s) 随 time (s) 的变化。bytes (KB)"
    plt.close(fig)


def test_a_title_numbers_the_flow_only_where_the_capture_holds_several(bulk):
    """A trial's capture holds one flow: "flow 0" in its titles would name nothing."""
    assert plots.time_sequence(bulk).axes[0].get_title() == "Time-sequence, flow 0"
    assert plots.time_sequence(flow0(bulk)).axes[0].get_title() == "Time-sequence"
    assert plots.rtt(flow0(bulk), language="zh").axes[0].get_title() == "往返时延"


def test_drawing_into_given_axes_returns_them(bulk):
    fig, axes = plt.subplots(2, 1)
    assert plots.rtt(bulk, ax=axes[0]) is axes[0]
    assert plots.throughput(bulk, ax=axes[1]) is axes[1]
    assert by_gid(axes[1], "goodput")


def test_sweep_lines_show_means_with_confidence_bands_and_theory(tmp_path):
    rng = np.random.default_rng(1)
    rows = [{"sndbuf": s, "cc": cc, "goodput": s * k + rng.normal(0, 50)}
            for s in (16, 64, 256) for cc, k in (("bbr", 10), ("cubic", 8)) for _ in range(5)]
    frame = pd.DataFrame(rows)
    fig = plots.sweep_lines(frame, "sndbuf", "goodput", "cc", logx=True)
    ax = fig.axes[0]
    means = frame.groupby(["cc", "sndbuf"])["goodput"].mean()
    lines = [line for line in ax.get_lines() if len(line.get_xdata()) == 3]
    ys = sorted(tuple(np.round(line.get_ydata(), 6)) for line in lines)
    assert ys == sorted(tuple(np.round(means[cc].to_numpy(), 6)) for cc in ("bbr", "cubic"))
    assert len(ax.collections) >= 2  # one confidence band per hue
    assert ax.get_xscale() == "log"
    line = plots.theory_curve(ax, [16, 64, 256], lambda s: 10 * s)
    assert line.get_ydata().tolist() == [160, 640, 2560] and line.get_gid() == "theory"
    fig.savefig(tmp_path / "sweep.png")
    with pytest.raises(ValueError, match="no column 'rtt'"):
        plots.sweep_lines(frame, "rtt", "goodput")


def test_a_log_axis_of_a_sweep_is_labelled_in_plain_numbers():
    frame = pd.DataFrame({"loss %": [1, 1, 10, 10], "MB/s": [1.2, 1.3, 0.2, 0.25]})
    ax = plots.sweep_lines(frame, "loss %", "MB/s", logx=True, logy=True).axes[0]
    ax.figure.canvas.draw()
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
    labels = [label.get_text() for label in ax.get_yticklabels() + ax.get_yticklabels(minor=True)
              + ax.get_xticklabels() if label.get_text()]
    assert labels and all(re.fullmatch(r"[\d.]+", text) for text in labels), labels
    assert "0.2" in [label.get_text() for label in ax.get_yticklabels(minor=True)]  # within a decade: 2s and 5s read


def test_sweep_heatmap_cells_are_the_means():
    frame = pd.DataFrame({"rtt": [10, 10, 10, 50, 50, 50], "loss": [0, 0, 1, 0, 1, 1],
                          "goodput": [90.0, 94.0, 40.0, 80.0, 10.0, 12.0]})
    fig = plots.sweep_heatmap(frame, "rtt", "loss", "goodput")
    mesh = fig.axes[0].collections[0]
    # Rows: loss 1 then 0 (highest first); columns: rtt 10, 50.
    assert mesh.get_array().reshape(2, 2).tolist() == [[40.0, 11.0], [92.0, 80.0]]


def test_existing_summary_figures_still_render(tmp_path):
    fig = plots.configured_vs_measured([{"quantity": "rtt", "unit": "ms", "configured": 20, "measured": 20.4}])
    fig.savefig(tmp_path / "cvm.png")
    fig = plots.rtt_samples([0.020, 0.021, 0.0205], 0.020)
    fig.savefig(tmp_path / "rtt.png")
    assert (tmp_path / "rtt.png").stat().st_size > 0


def test_first_seconds_starts_at_the_first_data_segment_not_the_capture(bulk):
    # The capture began at the small connection's handshake; the big flow's data at 0.020 s.
    p = flow0(bulk)
    first_data = float(p.loc[(p["dir"] == 0) & (p["len"] > 0), "rel_time"].min())
    assert first_data > 0.015
    assert plots.first_seconds(bulk, 0.05) == pytest.approx((first_data, first_data + 0.05))
    with pytest.raises(ValueError, match="seconds"):
        plots.first_seconds(bulk, 0)


# ---------------------------------------------------------------- units, axes and legends


def test_a_goodput_axis_names_the_unit_its_ticks_are_in(bulk):
    """The label and the ticks speak one unit (not 'goodput (bit/s)' over ticks in Mbit/s)."""
    for reference, unit in ((5e6, "Mbit/s"), (None, None)):
        ax = plots.throughput(bulk, bin_s=0.010, reference_bps=reference, language="en").axes[0]
        ax.figure.canvas.draw()
        peak = max(by_gid(ax, "goodput")[0].get_ydata().max(), reference or 0)
        expected = unit or plots._rate_unit(peak)[0]
        assert ax.get_ylabel() == f"goodput ({expected})"
        ticks = [label.get_text() for label in ax.get_yticklabels() if label.get_text()]
        assert ticks and all(re.fullmatch(r"[\d.]+", tick) for tick in ticks), ticks  # numbers, no unit
    assert plots._rate_unit(8.2e6) == ("Mbit/s", 1e6) and plots._rate_unit(185e3) == ("kbit/s", 1e3)
    assert plots._rate_unit(900) == ("bit/s", 1.0) and plots._rate_unit(2.5e9) == ("Gbit/s", 1e9)
    from tcplab.words import messages
    zh = plots.throughput(bulk, bin_s=0.010, reference_bps=5e6, language="zh").axes[0]
    assert zh.get_ylabel() == messages("zh")("plot.goodput", unit="Mbit/s") and "Mbit/s" in zh.get_ylabel()


def test_a_goodput_graph_over_a_span_has_empty_bins_where_nothing_crossed(bulk):
    """A flow whose data fits in one bin still shows what it is: one full bin, then silence
    until the connection ends (the autotuned pacer of case 10)."""
    span = plots.flow_span(bulk)
    p = flow0(bulk)
    assert span == pytest.approx((p["rel_time"].min(), p["rel_time"].max()))  # handshake to last packet
    ax = plots.throughput(bulk, bin_s=0.1, t_range=(0.0, 1.0)).axes[0]
    line, = by_gid(ax, "goodput")
    x, y = line.get_xdata(), line.get_ydata()
    assert ax.get_xlim() == pytest.approx((0.0, 1.0)) and x[0] <= 0.0 and x[-1] >= 1.0
    assert np.diff(x) == pytest.approx(0.1)  # the same 100 ms grid throughout
    assert (y[:-1] > 0).sum() <= 4 and (y[:-1] == 0).sum() >= 6  # data in the first bins, empty after
    assert y[:-1].sum() * 0.1 / 8 == pytest.approx(12 * MSS)  # every new byte counted once
    assert "," not in ax.get_title().removeprefix("Goodput, flow 0")  # all the data shown: no span in the title
    zoom = plots.throughput(bulk, bin_s=0.002, t_range=(0.024, 0.030)).axes[0]
    assert zoom.get_title().endswith("24 ms to 30 ms")  # a zoom leaving data out says so


def test_window_and_inflight_sizes_its_axis_to_the_sender_and_cuts_a_far_larger_window(bulk):
    """Case 01: a 2.5 MB window squashed an event of tens of KB to the axis's floor."""
    p = flow0(bulk)
    sent = p[(p["dir"] == 0) & (p["bytes_in_flight"] >= 0)]
    window = p.loc[(p["dir"] == 1) & p["f_ack"] & (p["win"] >= 0), "win"]
    assert window.max() > plots.WINDOW_CUT * sent["bytes_in_flight"].max()  # the fixture's window is far above
    ax = plots.window_and_inflight(bulk, language="en").axes[0]
    assert ax.get_ylim()[1] == pytest.approx(1.08 * sent["bytes_in_flight"].max(), rel=0.5)
    assert ax.get_ylim()[1] < window.max()
    line, = by_gid(ax, "advertised_window")
    assert line.get_ydata().max() == window.max()  # the data is all there, only the view is cut
    from tcplab.units import format_size
    assert line.get_label() == f"advertised window (up to {format_size(window.max())}, cut off at the top)"
    # A window no more than WINDOW_CUT times the sender's lines is shown whole.
    telemetry = pd.DataFrame({"time": [T0 + 0.025, T0 + 0.035], "side": ["client"] * 2, "state": ["ESTAB"] * 2,
                              "cwnd": [30, 40], "mss": [MSS] * 2, "skmem_w": [1, 1], "skmem_tb": [1, 1]})
    ax = plots.window_and_inflight(bulk, telemetry=telemetry, language="en").axes[0]
    assert ax.get_ylim()[1] >= window.max()
    assert by_gid(ax, "advertised_window")[0].get_label() == "advertised window"


def _legend_hides_data(ax):
    renderer = ax.figure.canvas.get_renderer()
    box = ax.get_legend().get_window_extent(renderer)
    return plots._hides(plots._shown_data(ax, renderer), box)


def test_a_legend_goes_where_it_hides_no_data():
    # A free corner: the legend goes there, and the axis keeps its limits.
    fig, ax = plt.subplots(figsize=(8, 3.6))
    t = np.linspace(0, 10, 400)
    ax.plot(t, t, label="rising")
    ax.plot(t, t / 2, label="half")
    limits = ax.get_ylim()
    plots.legend(ax)
    assert not _legend_hides_data(ax) and ax.get_ylim() == limits
    assert not ax.get_legend()._tcplab_outside
    # Lines everywhere (case 01's in-flight graph): room is made above them, and layout kept.
    fig, ax = plt.subplots(figsize=(8, 3.6))
    rng = np.random.default_rng(3)
    for k, name in enumerate(("bytes in flight", "advertised window", "cwnd", "send buffer used", "send buffer")):
        ax.step(t, rng.uniform(0, 100, t.size) * (k + 1) / 5, where="post", label=name)
    top = ax.get_ylim()[1]
    plots.legend(ax)
    plots.tidy(fig)
    assert not _legend_hides_data(ax)
    assert ax.get_ylim()[1] > top and not ax.get_legend()._tcplab_outside
    raised = ax.get_ylim()
    plots.tidy(fig)  # placed again, not raised again
    assert ax.get_ylim() == pytest.approx(raised, rel=0.01)
    # A log axis has no room to make: the legend goes outside, beside the axes.
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for k in range(4):
        ax.plot(t + 0.1, 10 ** rng.uniform(0, 3, t.size), label=f"line {k}")
    ax.set_yscale("log")
    plots.legend(ax)
    plots.tidy(fig)
    assert ax.get_legend()._tcplab_outside and not _legend_hides_data(ax)


def test_the_flow_figures_legends_hide_none_of_their_data(bulk):
    telemetry = pd.DataFrame({
        "time": [T0 + 0.025, T0 + 0.035], "side": ["client"] * 2, "state": ["ESTAB"] * 2,
        "cwnd": [10, 14], "mss": [MSS] * 2, "skmem_w": [20000, 30000], "skmem_tb": [46080, 46080]})
    for fig in (plots.time_sequence(bulk), plots.throughput(bulk, bin_s=0.01, reference_bps=3e6),
                plots.window_and_inflight(bulk, telemetry=telemetry), plots.rtt(bulk)):
        fig.canvas.draw()
        assert not _legend_hides_data(fig.axes[0]), fig.axes[0].get_title()


def test_lines_of_a_sweep_measured_at_the_same_point_both_show():
    """Case 07: 'off (server)' at 20 ms sat exactly under 'off (client)' and hid it."""
    frame = pd.DataFrame({"rtt_ms": [10, 20, 40, 20, 20], "Mbit/s": [51.0, 26.0, 13.0, 26.0, 95.0],
                          "scaling": ["off (client)"] * 3 + ["off (server)", "on"]})
    ax = plots.sweep_lines(frame, "rtt_ms", "Mbit/s", "scaling", logx=True, language="en").axes[0]
    drawn = [line for line in ax.get_lines() if len(line.get_xdata())]
    assert len(drawn) == 3
    markers = [line.get_marker() for line in drawn]
    sizes = [line.get_markersize() for line in drawn]
    orders = [line.get_zorder() for line in drawn]
    assert len(set(map(str, markers))) == 3  # a mark of its own for each line
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]  # each next one smaller,
    assert orders == sorted(orders) and orders[0] < orders[-1]  # and on top
    legend = ax.get_legend()
    assert [h.get_markersize() for h in legend.legend_handles] == sizes  # the legend shows the same marks
    line = plots.theory_curve(ax, [10, 20, 40], lambda r: 520 / r, label="ceiling")
    assert line.get_zorder() < min(orders)  # a prediction under the measurements


def test_case_figures_of_recorded_runs():
    """Cases 05, 07 and 10 as shipped: the zero-window graph sized to the episode, the ceiling
    plot with every line named, the pacer's panel spanning its reading time."""
    from tcplab.cases import pacing
    from tcplab.rooms import windows
    from tcplab.rooms import zerowindow as zw
    from tcplab.cases.replay import replay_root
    from tcplab.cases.trial import Trial
    from tcplab.runs import load_run

    def trial(case, label):
        return Trial(label, load_run(replay_root() / case / label), replayed=True)

    auto = trial("05-zero-window", "autotuned")
    view = zw.sender_packets(auto)
    closed, reopened = zw.episode(view)
    start, end = zw.pause_span(auto)
    assert start < closed < reopened < end < reopened + 0.5
    ax = plots.time_sequence(auto.packets, t_range=(start, end), language="en").axes[0]
    assert "to" in ax.get_title() and ax.get_ylim()[1] < 3 * view.loc[view["rel_time"] <= closed, "seq"].max()
    assert not _legend_hides_data(ax)

    runs = pd.DataFrame({"rtt_ms": [10, 20, 20, 20], "steady Mbit/s": [51.0, 26.0, 26.0, 95.0],
                         "scaling": ["off (client)", "off (client)", "off (server)", "on"]})
    ax = windows.ceiling_plot(runs, rate_bps=100e6, language="en").axes[0]
    handles, named = ax.get_legend_handles_labels()
    assert {"65535 B / RTT (the window without scaling)", "payload line rate"} <= set(named)
    keys = {(str(h.get_color()), h.get_linestyle()) for h in handles}
    for line in (line for line in ax.get_lines() if len(line.get_xdata())):  # each line drawn has its entry
        assert (str(line.get_color()), line.get_linestyle()) in keys, line
    assert not _legend_hides_data(ax)

    paced = [trial("10-rate-limiting", label) for label in ("pacer-rcvbuf-1KB", "pacer-autotuned")]
    fig = pacing.wire_plot([(t, 20480) for t in paced], language="en")
    for ax, t in zip(fig.axes, paced):
        assert ax.get_xlim() == pytest.approx(plots.flow_span(t.packets))
        line, = by_gid(ax, "goodput")
        assert len(line.get_xdata()) > 10  # bins across the reading time, not one
        assert not _legend_hides_data(ax)
