"""Case 08 helpers: flights and bursts on synthetic packets, the predictions (no kernel needed)."""

from __future__ import annotations

import pandas as pd
import pytest

from tcplab.analysis import theory
from tcplab.analysis.packets import read_packets
from tcplab.rooms import slowstart


def flight_packets(first: int, second: int, idle: float = 2.0):
    """Server data in rounds of ``first`` then twice that, an ACK 20 ms after each round's
    first segment; then after ``idle`` a burst starting with ``second`` segments."""
    rows, seq, t = [], 1, 0.0
    for burst_start, flight in ((0.0, first), (idle, second)):
        t = burst_start
        for n in (flight, 2 * flight):
            first_seq = seq
            for _ in range(n):
                rows.append((t, 1, seq, 1448, False))
                seq += 1448
                t += 0.0001
            rows.append((t + 0.02, 0, 1, 0, True, first_seq + 1448))
            t += 0.02
    frame = pd.DataFrame([r[:5] for r in rows], columns=["rel_time", "dir", "seq", "len", "f_ack"])
    frame["ack"] = [r[5] if len(r) > 5 else 0 for r in rows]
    frame["f_ack"] = frame["dir"] == 0
    frame["flow"] = 0
    frame["time"] = frame["rel_time"]
    frame["retransmission"] = False
    return frame.sort_values("rel_time").reset_index(drop=True)


def test_first_flight_of_each_burst():
    flights = slowstart.first_flights(flight_packets(10, 30))
    assert list(flights["segments"]) == [10, 30]
    assert list(flights["burst_segments"]) == [30, 90]
    assert flights["ack_after_s"].iloc[0] == pytest.approx(0.02 + 0.001, abs=1e-3)
    assert len(slowstart.bursts(flight_packets(10, 30))) == 2


def test_a_run_of_retransmissions_after_a_silence_is_not_a_burst():
    packets = flight_packets(10, 30)
    tail = packets[(packets["dir"] == 1)].iloc[-3:].assign(rel_time=lambda f: f["rel_time"] + 0.5,
                                                           retransmission=True)
    resent = pd.concat([packets, tail]).sort_values("rel_time").reset_index(drop=True)
    assert len(slowstart.bursts(resent)) == 2
    assert list(slowstart.first_flights(resent)["segments"]) == [10, 30]


def test_rounds_and_restart_window():
    assert slowstart.rounds_to_send(71, 10) == 4
    assert slowstart.rounds_to_send(71, 30) == 2
    assert slowstart.rounds_to_send(0, 10) == 0
    assert slowstart.restart_window(700, 3.0, 0.22) == 10
    assert slowstart.restart_window(160, 0.5, 0.22) == 40  # two RTOs fit after the first: 160 -> 80 -> 40
    assert slowstart.restart_window(8, 3.0, 0.22) == 10
    assert slowstart.rounds_to_grow(10, 345, 1.05) == 73  # 10 x 1.05^72 = 335 < 345 <= 352
    assert slowstart.rounds_to_grow(10, 10, 1.05) == 0
    with pytest.raises(ValueError):
        slowstart.rounds_to_grow(10, 20, 1.0)


def test_growth_time_is_slower_than_slow_start_and_capped_by_the_line():
    line = theory.max_goodput(100e6)
    slow = slowstart.growth_time(6_000_000, 0.04, line)
    assert 2.0 < slow < 3.2
    assert slow > theory.transfer_time(6_000_000, line, 0.04)
    big = slowstart.growth_time(1e9, 0.04, line)
    assert big == pytest.approx(1e9 * 8 / line, rel=0.1)


def test_cached_entry_reads_counts_and_times():
    metrics = [{"address": "10.201.1.2", "age": "1.580sec", "ssthresh": "7", "cwnd": "10", "rtt": "44633us",
                "rttvar": "20ms", "source": "10.201.2.2"}]
    entry = slowstart.cached_entry(metrics, "10.201.1.2")
    assert entry["ssthresh"] == 7 and entry["cwnd"] == 10
    # ip's own time formats are written as every page writes a duration.
    assert (entry["age"], entry["rtt"], entry["rttvar"]) == ("1.58 s", "44.6 ms", "20 ms")
    assert entry["source"] == "10.201.2.2"
    assert slowstart.cached_entry(metrics, "10.9.9.9") == {}


def test_drop_rule_refuses_a_bad_share():
    with pytest.raises(ValueError):
        slowstart.start_drops(object(), 0)


def test_round_trips_of_a_transfer_are_counted_in_its_capture():
    # Two rounds of data 20 ms apart, then after the idle pause two more: four flights.
    assert slowstart.data_rounds(flight_packets(10, 10, idle=2.0), rtt_s=0.02) == 4
    # The shipped runs of case 08 (Linux 6.18): 100 KB in four round trips from IW 10, two from 30.
    from tcplab.cases.replay import replay_root
    from tcplab.runs import load_run

    for variant, rounds in (("initcwnd-default#1", 4), ("initcwnd-30#1", 2)):
        run = load_run(replay_root() / "08-slow-start" / variant)
        assert slowstart.data_rounds(read_packets(run.pcap), rtt_s=0.02) == rounds
