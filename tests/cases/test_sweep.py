"""Sweeps: grids, labels, the tidy frame, the steady rate, the knee and transfer budgets."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from tcplab.cases import CaseLab, sweep
from tcplab.lab import PathSpec
from tcplab.traffic import Bulk
from tcplab.units import ParameterError


def test_grid_varies_the_first_axis_slowest():
    assert sweep.grid(rtt=[10, 20], buf=["a", "b"]) == [
        {"rtt": 10, "buf": "a"}, {"rtt": 10, "buf": "b"}, {"rtt": 20, "buf": "a"}, {"rtt": 20, "buf": "b"}]
    with pytest.raises(ParameterError):
        sweep.grid(rtt=[])
    with pytest.raises(ParameterError):
        sweep.grid(rtt="20ms")


def test_build_labels_points_and_refuses_repeated_labels():
    make = lambda v: (Bulk(size="64KB"), PathSpec(rtt=f"{v['rtt']}ms"))  # noqa: E731
    variants = sweep.build(dict(rtt=[10, 20]), make, name="rtt-{rtt}ms")
    assert [v.label for v in variants] == ["rtt-10ms", "rtt-20ms"]
    assert variants[1].path.rtt == pytest.approx(0.02) and variants[1].values == {"rtt": 20}
    explicit = sweep.build([{"rtt": 2, "loss": 1}], make, name=lambda v: f"loss-{v['loss']}")
    assert explicit[0].label == "loss-1"
    with pytest.raises(ParameterError, match="repeated"):
        sweep.build(dict(rtt=[10, 20]), make, name="same")


def test_a_count_of_runs_is_checked_under_its_parameters_name():
    assert sweep.whole_runs("loss_repetitions", 3) == 3
    for bad in (0, -1, 2.5, "3", True, None):
        with pytest.raises(ParameterError) as info:
            sweep.whole_runs("loss_repetitions", bad)
        assert info.value.name == "loss_repetitions" and "whole number" in info.value.accepted


def _metrics(delivered, bin_s=0.1, recoveries=()):
    bins = pd.DataFrame({"time": [bin_s * i for i in range(len(delivered))], "delivered_bps": delivered})
    series = {"recoveries": pd.DataFrame(list(recoveries), columns=["start", "end"])}
    return SimpleNamespace(throughput=bins, bin_s=bin_s, series=lambda: series, flow=0, data_dir=1, rtt_s=0.02, rwnd_median_bytes=1536.0,
                           rwnd_max_bytes=2048.0, inflight_max_bytes=1536.0, window_scaling="on",
                           receiver_wscale=7, mss=768, data_packets=200, retransmissions=3, resent_segments=4, timeouts=3,
                           fast_retransmissions=1, window_full=5)


def test_steady_goodput_skips_the_ramp_and_the_partial_last_bin():
    # ramp 10, 50; then 90, 90, 30 (one slow round trip), 90; last bin partial (5)
    m = _metrics([10, 50, 90, 90, 30, 90, 5])
    assert sweep.steady_goodput(m) == pytest.approx((90 + 30 + 90) / 3)  # delivered over that time
    assert sweep.steady_goodput(m, statistic="median") == pytest.approx(90)  # the typical round trip
    assert sweep.steady_goodput(m, after=0.0, statistic="mean") == pytest.approx((10 + 50 + 3 * 90 + 30) / 6)
    assert math.isnan(sweep.steady_goodput(_metrics([])))
    # A handshake held up by a lost SYN-ACK (bins without data before the first) is no part of
    # the transfer: its second half starts from the first data.
    late_start = _metrics([0] * 30 + [10, 50, 90, 90, 30, 90, 5])
    assert sweep.steady_goodput(late_start) == pytest.approx(sweep.steady_goodput(m))
    with pytest.raises(ParameterError):
        sweep.steady_goodput(m, after=1.0)
    with pytest.raises(ParameterError):
        sweep.steady_goodput(m, statistic="max")


def test_steady_goodput_does_not_begin_inside_a_loss_recovery():
    """A hole at the middle of the transfer holds the cumulative ACK (0 delivered), and filling it
    releases the segments that arrived behind it (a bin of 300 on a line of 100). Begun inside
    that recovery, the second half would count them and read above the line; it begins where the
    recoveries the middle falls in end, overlapping ones included."""
    delivered = [50, 100, 100, 100, 0, 0, 300, 100, 100, 100, 5]  # a line of 100 per bin
    plain = _metrics(delivered)
    assert sweep.steady_goodput(plain) == pytest.approx((0 + 300 + 100 * 3) / 5)  # 120: above the line
    held = _metrics(delivered, recoveries=[(0.38, 0.52), (0.45, 0.61)])
    assert sweep.steady_goodput(held) == pytest.approx(100)


def test_steady_goodput_over_ack_times_and_the_line_ceiling_rule():
    """Over ACK times the steady rate is the cumulative ACK's rise across the second half, read
    where that half begins and ends (interpolated between the ACKs around each end), not the
    bytes of whole ACKs over bins whose edges fall between them. A synthetic run whose ACKs
    acknowledge 13 MB/s on a 100 Mbit/s line (at most 11.96 MB/s of payload) fails the line-ceiling
    rule, saying why; a run at the line's pace passes it."""
    from tcplab.analysis import theory
    from tcplab.report.scores import below_line

    bins = _metrics([8e6 * 10] * 21, bin_s=0.1)  # 2.1 s of bins; the last, partial, left out
    def run_at(bytes_per_s):
        times = [0.0005 + 0.001 * k for k in range(2101)]  # an ACK every ms, off the bins' edges
        return pd.DataFrame({"time": times, "acked": [bytes_per_s * t for t in times]})
    line = 100e6
    ceiling = theory.line_ceiling(line, 1.0) / 8e6  # MB/s, over the steady second's span
    too_fast = sweep.steady_goodput(bins, acks=run_at(13e6)) / 8e6
    assert too_fast == pytest.approx(13.0)
    broken = below_line("steady goodput", too_fast, ceiling, unit="MB/s")
    assert not broken.passed and broken.predicted == pytest.approx(ceiling)
    assert "line's payload ceiling" in broken.rule and "wrongly" in broken.rule
    at_line = sweep.steady_goodput(bins, acks=run_at(theory.max_goodput(line) / 8)) / 8e6
    assert at_line == pytest.approx(theory.max_goodput(line) / 8e6)
    assert below_line("steady goodput", at_line, ceiling, unit="MB/s").passed
    # The ceiling is the line's payload share (1448 of 1514 B) and one segment over the span, no more.
    assert theory.line_ceiling(line, 1.0) == pytest.approx(line * 1448 / 1514 + 8 * 1448)
    with pytest.raises(ValueError):
        below_line("steady goodput", 1.0, 0)
    # A delay line that released a packet 2 ms late may have shortened a 0.4 s span by 2 ms: the
    # line's share may read 2 / 400 higher. A negative lateness is refused by name.
    assert theory.line_ceiling(line, 0.4, late_s=0.002) == pytest.approx(
        line * 1448 / 1514 * (1 + 0.002 / 0.4) + 8 * 1448 / 0.4)
    with pytest.raises(ValueError, match="late"):
        theory.line_ceiling(line, 0.4, late_s=-0.001)


def test_a_window_sent_in_bursts_is_read_between_bursts_of_the_same_phase():
    """A 64 KB window every 80 ms (its ACKs a quarter of a millisecond apart, then silence): from
    the first ACK of the steady half to its last, the bytes count one window more than the round
    trips between carry (case 07 read 7.40 Mbit/s where 64 KB per 80 ms is 6.55). Between the
    first ACKs of the first and last bursts it reads 64 KB per round trip; a flow the line clocks
    (no silences) is read from its first ACK to its last, as before."""
    window, rtt, per_ack = 65535, 0.08, 2 * 1448
    times, acked, total = [], [], 0
    for j in range(16):  # 1.28 s of round trips
        for k in range(window // per_ack + 1):
            total += min(per_ack, window * (j + 1) - total)
            times.append(0.003 + j * rtt + 0.00025 * k)
            acked.append(total)
    acks = pd.DataFrame({"time": times, "acked": acked, "hole": False})
    bins = _metrics([8 * window / rtt] * 13, bin_s=0.1)
    assert sweep.steady_goodput(bins, acks=acks) == pytest.approx(8 * window / rtt, rel=0.01)
    naive = (acked[-1] - acked[next(i for i, t in enumerate(times) if t >= 0.65)]) * 8 / (
        times[-1] - next(t for t in times if t >= 0.65))
    assert naive > 1.1 * 8 * window / rtt  # what first-to-last read
    smooth = pd.DataFrame({"time": [0.0005 + 0.001 * k for k in range(1301)], "hole": False})
    smooth["acked"] = 1e6 * smooth["time"]
    assert sweep.steady_goodput(bins, acks=smooth) == pytest.approx(8e6)


def test_a_trials_lateness_is_its_delay_lines_worst_and_0_without_one():
    from tcplab.cases.trial import Trial

    def trial(health):
        return Trial("x", SimpleNamespace(observe={"health": health} if health is not None else {}))
    queues = {"queue1": {"late_worst_s": 0.0005}, "queue2": {"late_worst_s": 0.002}}
    assert trial({"delay_line": queues}).late_s == 0.002
    assert trial({"delay_line": {}}).late_s == 0.0 and trial({}).late_s == 0.0 and trial(None).late_s == 0.0
    # A queue that did not answer for its counters (starved of CPU) is recorded as None.
    assert trial({"delay_line": {**queues, "queue3": None, "queue4": {"count": 0}}}).late_s == 0.002


class _FakeLab:
    def __init__(self):
        self.calls = []

    def _trial(self, label, goodput):
        packets = pd.DataFrame({"flow": [0, 0, 0, 0], "dir": [0, 1, 1, 1], "len": [0, 768, 768, 100]})
        return SimpleNamespace(label=label, goodput_bps=goodput, duration_s=1.0, metrics=_metrics([8e6] * 4),
                               packets=SimpleNamespace(packets=packets))

    def run(self, label, workload, *, path, observe=None):
        self.calls.append(label)
        return self._trial(label, 8e6)

    def repeat(self, label, workload, *, path, times, observe=None):
        return [self.run(f"{label}#{i}", workload, path=path, observe=observe) for i in range(1, times + 1)]


def test_run_gives_one_tidy_row_per_trial():
    lab = _FakeLab()
    variants = sweep.build(dict(rtt=[10, 20]), lambda v: (None, None), name="r{rtt}")
    frame = sweep.run(lab, variants, repetitions=2)
    assert lab.calls == ["r10#1", "r10#2", "r20#1", "r20#2"]
    assert list(frame["rtt"]) == [10, 10, 20, 20] and list(frame["repetition"]) == [1, 2, 1, 2]
    row = frame.iloc[0]
    assert row["goodput Mbit/s"] == pytest.approx(8) and row["KB/s"] == pytest.approx(1000)
    assert row["retransmitted %"] == pytest.approx(2) and row["handshake rtt ms"] == pytest.approx(20)
    assert row["segment B"] == 768  # data direction only, ACKs left out
    assert row["Window Full"] == 5
    assert set(sweep.COLUMNS) <= set(frame.columns)
    single = sweep.run(_FakeLab(), variants)
    assert list(single["trial"]) == ["r10", "r20"]
    with pytest.raises(ParameterError):
        sweep.run(lab, variants, repetitions=0)


def test_knee_is_where_the_window_limited_slope_meets_the_line():
    # Window-limited runs at 64 and 256 KB climb 0.19 and 0.2 Mbit/s per KB; the 512 KB run
    # sits at the knee and the 4 MB run on the line: neither moves the answer.
    frame = pd.DataFrame({"buf": [64, 256, 512, 4096], "y": [12.0, 51.2, 67.0, 96.0]})
    limited = frame["buf"] < 300
    knee, low, high = sweep.knee_from_slope(frame, "buf", "y", 95.0, limited)
    assert knee == pytest.approx(95.0 / ((12.0 / 64 + 51.2 / 256) / 2))
    assert low == pytest.approx(95.0 / 0.2) and high == pytest.approx(95.0 / (12.0 / 64))
    assert all(math.isnan(v) for v in sweep.knee_from_slope(frame, "buf", "y", 95.0, frame["buf"] < 0))


def test_budget_size_follows_the_expected_speed():
    # 1536 B per 20 ms = 76.8 KB/s: 2 s is 153 600 B = 150 KiB
    assert sweep.budget_size(2, 0.02, 100e6, window=1536) == 150 * 1024
    # no window: the line's goodput (95.6 % of 100 Mbit/s), 1 s ≈ 11.7 MiB
    assert sweep.budget_size(1, 0.02, 100e6) == pytest.approx(100e6 * 1448 / 1514 / 8, rel=0.01)
    assert sweep.budget_size(0.001, 0.1, 100e6, window=1536) == 16 * 1024  # the floor
    with pytest.raises(ParameterError):
        sweep.budget_size(0, 0.02, 100e6)


def test_a_small_sweep_on_the_real_kernel(root, tmp_path):
    """Two RTTs with a pinned 4 KB buffer: the slower path is slower, and the frame says why."""
    lab = CaseLab("97-sweep-fixture", runs_dir=tmp_path / "runs", replay_dir=tmp_path / "replay")
    four = {"tcp_rmem": "4096 4096 4096", "tcp_wmem": "4096 4096 4096"}
    variants = sweep.build(
        dict(rtt=[5, 20]),
        lambda v: (Bulk(size="48KB", cc="cubic"), PathSpec(rtt=f"{v['rtt']}ms", rate="100mbit", sysctls=four)),
        name="rtt-{rtt}ms")
    frame = sweep.run(lab, variants, observe=dict(tracepoints=False)).set_index("rtt")
    assert frame.loc[20, "goodput Mbit/s"] < frame.loc[5, "goodput Mbit/s"] / 2
    assert frame.loc[20, "rwnd max B"] < 4096
    assert frame.loc[20, "segment B"] <= frame.loc[20, "rwnd max B"]
    assert list(frame["window scaling"]) == ["on", "on"]


def test_line_share_without_loss_is_lower_for_loss_based_senders():
    # bbr paces at the bottleneck's rate; cubic's start-up cuts may leave one BDP in flight
    assert sweep.line_share_without_loss("bbr") == sweep.LINE_SHARE_WITHOUT_LOSS["bbr"]
    assert sweep.line_share_without_loss("cubic") == sweep.line_share_without_loss("reno")
    assert sweep.line_share_without_loss("cubic") < sweep.line_share_without_loss("bbr") <= 1


def test_steady_goodput_over_ack_times_reads_only_acks_without_a_hole():
    """Behind a hole the cumulative ACK waits while SACK blocks report what arrived; the ACK that
    fills it acknowledges those bytes at once. A stretch whose first ACK sat behind a hole counts
    bytes that crossed the line before it (case 06 live read 12.72 MB/s on an 11.96 MB/s line);
    read from the first ACK without a SACK block to the last, the rate is the line's."""
    bins = _metrics([8e6 * 10] * 21, bin_s=0.1)
    times = [0.0005 + 0.001 * k for k in range(2101)]
    line = 10e6  # bytes/s
    acked, hole = [], []
    for t in times:
        behind = 0.95 <= t < 1.15  # a hole opened at 0.95 s and filled at 1.15 s
        acked.append(line * (0.95 if behind else t))
        hole.append(behind)
    acks = pd.DataFrame({"time": times, "acked": acked, "hole": hole})
    # The second half begins at 1.0 s, inside the hole: from there the cumulative ACK over-counts.
    assert sweep.steady_goodput(bins, acks=acks.drop(columns="hole")) > 1.04 * 8 * line
    assert sweep.steady_goodput(bins, acks=acks) == pytest.approx(8 * line, rel=1e-6)
