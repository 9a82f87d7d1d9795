"""Case 06 helpers on synthetic packets and tcp_probe samples (no kernel needed)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tcplab.analysis import theory
from tcplab.rooms import loss


def packets(rows):
    """A minimal packet table: (rel_time, dir, seq, len) rows of flow 0; dir 1 = server data."""
    frame = pd.DataFrame(rows, columns=["rel_time", "dir", "seq", "len"])
    frame["flow"] = 0
    frame["time"] = 1000.0 + frame["rel_time"]
    frame["ack"] = 0
    frame["f_ack"] = True
    return frame


def data_then_resend():
    # Five segments, the second lost and resent after 0.25 s of silence (a timeout), plus ACKs.
    rows = [(0.000 + 0.001 * i, 1, 1 + 1000 * i, 1000) for i in range(5)]
    rows += [(0.020, 0, 1, 0), (0.021, 0, 1, 0)]
    rows += [(0.271, 1, 1001, 1000), (0.272, 1, 5001, 1000)]
    return packets(rows)


def test_a_resend_after_a_long_silence_is_a_timeout():
    # The resends (by sequence coverage) are at 0.271, 0.267 s after the last data segment, and 0.272.
    no_samples = pd.DataFrame(columns=["time", "cwnd", "ssthresh"])
    trial = SimpleNamespace(packets=data_then_resend(), trace=None, sender="server",
                            socket_samples=lambda side: no_samples,
                            metrics=SimpleNamespace(resent=pd.DataFrame({"time": [0.271, 0.272]})))
    out = loss.timeouts(trial)
    assert list(out["time"]) == [pytest.approx(0.271)]
    assert out["silence_s"].iloc[0] == pytest.approx(0.267)
    assert math.isnan(out["cwnd_min_after"].iloc[0])  # no tcp_probe samples


def test_window_cuts_find_each_lowering_of_ssthresh():
    probe = pd.DataFrame({"time": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5],
                          "cwnd": [10, 100, 100, 70, 80, 1],
                          "ssthresh": [np.nan, np.nan, 70, 70, 70, 56]})
    cuts = loss.window_cuts(probe)
    assert list(cuts["ssthresh_after"]) == [70, 56]
    assert cuts["ratio"].iloc[0] == pytest.approx(0.7)
    assert cuts["ratio"].iloc[1] == pytest.approx(0.7)
    assert cuts["cwnd_min_after"].iloc[1] == 1
    # The first cut's window is followed up to the second cut, not into its reduction.
    assert cuts["cwnd_min_after"].iloc[0] == 70


def test_the_cuts_table_heads_its_time_with_a_unit_and_keeps_the_first_cuts():
    probe = pd.DataFrame({"time": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5],
                          "cwnd": [10, 100, 100, 70, 80, 1],
                          "ssthresh": [np.nan, np.nan, 70, 70, 70, 56]})
    cuts = loss.window_cuts(probe)
    table = loss.cuts_table(cuts)
    assert list(table.columns) == ["time s", "cwnd_before", "ssthresh_after", "ratio", "cwnd_min_after"]
    assert list(table["time s"]) == list(cuts["time"])
    assert list(loss.cuts_table(cuts, first=1)["ssthresh_after"]) == [70]  # the first, in order of time
    assert loss.cuts_table(loss.window_cuts(probe.iloc[:0]), first=8).empty


def test_expected_goodput_and_sizes_follow_the_loss():
    line = theory.max_goodput(100e6)
    assert loss.expected_goodput("cubic", 0.02, 0, 100e6) == pytest.approx(line)
    assert loss.expected_goodput("bbr", 0.02, 0.01, 100e6) == pytest.approx(line)
    assert loss.expected_goodput("bbr", 0.02, 0.10, 100e6) == pytest.approx(line * 0.2)
    mathis = theory.mathis_throughput(1448, 0.02, 0.01)
    assert loss.expected_goodput("cubic", 0.02, 0.01, 100e6) == pytest.approx(1.5 * mathis)
    sizes = [loss.transfer_size(3, "cubic", 0.02, p, 100e6) for p in (0.001, 0.01, 0.1)]
    assert sizes[0] > sizes[1] > sizes[2] > 0
    assert all(s % 1024 == 0 for s in sizes)
    assert loss.seconds_for(3, 0.08) == pytest.approx(6)
    assert loss.lasting(4, "bbr", 0.08, 0.01) == 1 and loss.lasting(4, "cubic", 0.02, 0) == 1
    # Under heavy loss a loss-based sender's transfer lasts long enough for several timeouts.
    assert loss.lasting(4, "cubic", 0.02, 0.01) == 4
    assert loss.lasting(4, "cubic", 0.02, 0.10) == 4 * loss.HEAVY_LOSS_STRETCH


def test_points_and_labels_cover_the_grid_once():
    grid = loss.points({"20ms": [0, 1], "80ms": [1]}, ["cubic", "bbr"], 2)
    assert len(grid) == 3 * 2 * 2
    labels = {loss.label(p) for p in grid}
    assert len(labels) == len(grid)
    assert "cubic-20ms-1pct-seed2" in labels


def test_summary_means_over_repetitions():
    frame = pd.DataFrame({"rtt": ["20ms"] * 2, "loss %": [1.0, 1.0], "cc": ["cubic"] * 2,
                          "MB/s": [1.0, 2.0], "steady MB/s": [1.0, 1.0], "Mathis MB/s": [0.887] * 2,
                          "steady vs Mathis": [1.1, 1.1], "resent %": [1.0, 1.2], "loss events": [3, 5],
                          "timeouts": [0, 1]})
    row = loss.summary(frame).iloc[0]
    assert row["MB/s"] == 1.5 and row["loss events"] == 4 and not math.isnan(row["resent %"])


def test_without_tracepoints_the_senders_socket_samples_give_the_window():
    # A kernel without ftrace records no tcp_probe: the server's ss samples stand in, on the capture's clock.
    samples = pd.DataFrame({"time": [1000.10, 1000.12, 1000.14], "cwnd": [40, 28, 29],
                            "ssthresh": [np.nan, 28, 28]})
    trial = SimpleNamespace(packets=data_then_resend(), trace=pd.DataFrame(), sender="server",
                            socket_samples=lambda side: samples if side == "server" else None)
    probe = loss.sender_probe(trial)
    assert probe.attrs["source"] == "ss"
    assert list(probe["time"].round(2)) == [0.10, 0.12, 0.14] and list(probe["cwnd"]) == [40, 28, 29]
    cuts = loss.window_cuts(probe)
    assert len(cuts) == 1 and cuts["cwnd_before"].iloc[0] == 40 and cuts["ratio"].iloc[0] == pytest.approx(0.7)
