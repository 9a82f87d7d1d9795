"""pacing on synthetic packet tables: a smooth trickle and a burst with the same average."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

from tcplab.cases import pacing


@dataclass
class FakeTrial:
    label: str
    packets: pd.DataFrame
    goodput_bps: float
    duration_s: float
    telemetry: pd.DataFrame
    sides: dict = field(default_factory=dict)  # what each side's program reported
    receiver = "client"

    def side_report(self, side):
        return self.sides.get(side, {})


def _packets(times, sizes, windows):
    data = pd.DataFrame({"rel_time": times, "len": sizes, "dir": 1, "f_ack": True, "f_syn": False, "win": 0})
    acks = pd.DataFrame({"rel_time": np.asarray(times) + 0.01, "len": 0, "dir": 0, "f_ack": True, "f_syn": False,
                         "win": windows})
    frame = pd.concat([data, acks]).sort_values("rel_time", kind="stable").reset_index(drop=True)
    frame["flow"] = 0
    frame["time"] = frame["rel_time"] + 1000.0
    return frame


def _telemetry(recv_q):
    return pd.DataFrame({"side": "client", "state": "ESTAB", "recv_q": recv_q, "time": np.arange(len(recv_q)) * 0.02})


def test_trickle_is_smooth_and_small():
    times = np.arange(0, 5, 0.025)                      # 40 segments/s of 512 B = 20 480 B/s
    trial = FakeTrial("trickle", _packets(times, 512, 1152), 20480 * 8, 5.0, _telemetry([0, 512]))
    shape = pacing.shape(trial)
    assert shape["peak_over_app"] == pytest.approx(1.0, abs=0.1)
    assert shape["busy_share"] == pytest.approx(1.0, abs=0.05)
    assert pacing.receiver_window(trial)["win"].max() == 1152
    assert pacing.data_segments(trial).median() == 512
    assert pacing.recv_queue_peak(trial) == 512


def test_one_burst_is_bursty():
    times = np.linspace(0, 0.05, 71)                    # 71 x 1448 B in 50 ms, read over 5 s
    trial = FakeTrial("burst", _packets(times, 1448, [0] + [65536] * 70), 20563 * 8, 5.0,
                      _telemetry([0, 100000]))
    shape = pacing.shape(trial)
    assert shape["peak_over_app"] > 10 and shape["busy_share"] < 0.05
    table = pacing.summary([trial])
    assert table.loc["burst", "zero windows"] == 1 and table.loc["burst", "Recv-Q peak B"] == 100000


def test_last_backlog_is_what_waits_once_the_last_byte_arrived():
    # A reader drains 300 KB chunks; 90 KB are still unread when the transfer's last byte lands,
    # after a larger backlog earlier on (the peak is not the last backlog).
    telemetry = pd.DataFrame({"side": "client", "state": "ESTAB", "time": np.arange(6) * 0.5,
                              "bytes_received": [0, 400e3, 400e3, 700e3, 790e3, 790e3],
                              "recv_q": [0, 400e3, 100e3, 400e3, 90e3, 90e3]})
    trial = FakeTrial("curl", _packets([0.0], 1448, [65536]), 1e6, 3.0, telemetry)
    assert pacing.last_backlog(trial) == 90e3
    assert pacing.recv_queue_peak(trial) == 400e3


def test_last_backlog_without_byte_counts_is_unknown():
    trial = FakeTrial("old", _packets([0.0], 1448, [65536]), 1e6, 3.0,
                      _telemetry([0, 512]).assign(bytes_received=np.nan))
    assert np.isnan(pacing.last_backlog(trial))


def test_read_progress_and_throttled_reads_follow_the_socket():
    telemetry = pd.DataFrame({"side": "client", "state": "ESTAB", "time": 100 + np.arange(4) * 0.5,
                              "bytes_received": [np.nan, 400e3, 700e3, 800e3], "recv_q": [0, 300e3, 400e3, 100e3]})
    trial = FakeTrial("curl", _packets([0.0], 1448, [65536]), 8 * 200e3, 3.5, telemetry)
    trial.kernel_name = "6.1.176 (UML)"
    progress = pacing.read_progress(trial)
    assert progress["t"].tolist() == [0.0, 0.5, 1.0] and progress["read"].tolist() == [100e3, 300e3, 700e3]
    row = pacing.throttled_reads([trial], 800_000, 200e3).loc["6.1.176 (UML)"]
    assert row["last backlog B"] == 100e3 and row["reading s (predicted)"] == pytest.approx(3.5)
    assert row["average / limit"] == pytest.approx(1.0) and row["Recv-Q peak B"] == 400e3
    assert row["libcurl"] is None  # a run recorded before the record kept curl's version


def test_an_older_libcurls_read_loop_explains_an_unthrottled_read_and_nothing_else():
    trial = FakeTrial("curl", _packets([0.0], 1448, [65536]), 8 * 2e6, 0.8, _telemetry([0, 512]),
                      sides={"client": {"extra": {"curl": {"curl_version": "libcurl/7.88.1 OpenSSL/3.0.19 zlib/1.2.13"}}}})
    assert pacing.libcurl_version(trial) == "7.88.1"
    fast = pd.Series({"libcurl": "7.88.1", "reading s": 0.8, "reading s (predicted)": 8.0})
    assert pacing.read_unthrottled(fast) and pacing.loop_outran_limit(fast)
    # A libcurl whose loop stops for its limit, or an unknown one, leaves an unthrottled read unexplained.
    assert not pacing.loop_outran_limit(fast.replace("7.88.1", "8.14.1"))
    assert not pacing.loop_outran_limit(fast.replace("7.88.1", None))
    # A read that kept its schedule needs no explanation.
    assert not pacing.loop_outran_limit(pd.Series({"libcurl": "7.88.1", "reading s": 7.9, "reading s (predicted)": 8.0}))
