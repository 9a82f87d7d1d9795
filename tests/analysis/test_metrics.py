"""flow_metrics() on scripted captures whose every number is known in advance."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from tcplab.analysis import read_packets
from tcplab.analysis.metrics import flow_metrics, goodput_series
from tcplab.analysis.table import main_flow
from tcplab.units import ParameterError

from .pcapgen import ACK, PSH, Conn, Transfer, write_pcap

MSS = 1448


def metrics_of(tmp_path, frames, **kw):
    path = tmp_path / "m.pcap"
    write_pcap(path, frames, linktype=101)
    return flow_metrics(read_packets(path), **kw)


def test_clocked_transfer_numbers(tmp_path):
    tr = Transfer(rtt=0.02, mss=MSS)
    tr.clocked(20 * MSS, 200, rwnd=1 << 20)
    m = metrics_of(tmp_path, tr.frames)
    assert (m.sender, m.data_dir, m.vantage) == ("client", 0, "sender")
    assert m.payload_bytes == 220 * MSS and m.data_packets == 220
    assert m.handshake_rtt_s == pytest.approx(0.02, abs=1e-4)
    assert m.rtt_min_s == pytest.approx(0.02, abs=1e-5) and m.rtt_p90_s == pytest.approx(0.02, abs=1e-4)
    assert m.rtt_s == pytest.approx(0.02, abs=1e-4) and m.bin_s == m.rtt_s
    # 11 round trips of 20 segments, the last ACK one RTT after the last segment.
    assert m.transfer_s == pytest.approx(0.02 * 11, rel=0.01)
    assert m.goodput_bps == pytest.approx(8 * 220 * MSS / m.transfer_s)
    assert m.inflight_plateau_bytes == 20 * MSS and m.inflight_max_bytes == 20 * MSS
    assert m.window_scaling == "on" and m.receiver_wscale == 7 and m.mss == MSS
    assert m.rwnd_median_bytes == (1 << 20) and not m.rwnd_unknown_scale
    assert m.retransmissions == m.dup_acks == m.zero_window_packets == m.persist_probes == 0
    # The window goes out in a 0.4 ms burst, then the sender waits for ACKs with data out.
    assert set(m.gaps["reason"]) == {"ack-wait"} and (m.gaps["outstanding"] == 19 * MSS).all()
    assert m.requests.empty
    # Delivered bytes over time add up to the payload.
    assert (m.throughput["delivered_bps"] * m.bin_s / 8).sum() == pytest.approx(m.payload_bytes)
    json.dumps(m.to_dict(tables=True))


def test_losses_dup_acks_sack_and_karn(tmp_path):
    tr = Transfer()
    tr.round(10 * MSS, lose=2)
    tr.round(10 * MSS)
    m = metrics_of(tmp_path, tr.frames)
    assert m.retransmissions == 1 and m.fast_retransmissions == 1 and m.spurious_retransmissions == 0
    assert m.retransmitted_bytes == MSS and m.loss_fraction == pytest.approx(1 / 20)
    assert m.dup_acks == 7 and m.sack_packets == 7 and m.sack_blocks == 7
    assert len(m.recoveries) == 1 and m.recoveries["duration"].iloc[0] == pytest.approx(0.02, abs=0.001)
    # The ACK of the resent segment gives no RTT sample (Karn): no sample above one RTT.
    assert m.rtt["rtt"].max() == pytest.approx(0.02, abs=0.001)


def test_zero_window_episode_and_probes(tmp_path):
    tr = Transfer()
    tr.round(10 * MSS)
    tr.zero_window(10 * MSS, closed_s=0.5, probe_every=0.1)
    tr.round(10 * MSS)
    m = metrics_of(tmp_path, tr.frames)
    assert m.zero_window_packets == 5  # the closing ACK and the answer to each of 4 probes
    assert m.persist_probes == 4 and m.window_updates == 1
    assert m.zero_window_s == pytest.approx(0.5, abs=0.001)
    assert m.gap_s_by_reason["zero-window"] >= 0.5


def test_idle_gaps_and_application_pauses(tmp_path):
    tr = Transfer()
    for _ in range(4):
        tr.round(5 * MSS)
        tr.idle(0.1)
    tr.round(5 * MSS)
    m = metrics_of(tmp_path, tr.frames)
    gaps = m.gaps
    assert list(gaps["reason"]) == ["application"] * 4
    assert gaps["duration"].tolist() == pytest.approx([0.12] * 4, abs=0.001)
    assert (gaps["outstanding"] == 0).all() and m.idle_s == pytest.approx(0.48, abs=0.004)


def test_nagle_stalls_and_delayed_acks(tmp_path):
    tr = Transfer()
    tr.rounds([100] * 5, size=100, ack_delay=0.04)
    m = metrics_of(tmp_path, tr.frames)
    assert list(m.gaps["reason"]) == ["nagle-delayed-ack"] * 4
    assert m.delayed_ack_count == 5
    assert m.delayed_acks["extra"].tolist() == pytest.approx([0.04] * 5, abs=1e-4)


def test_a_scale_offered_by_one_end_only_is_not_applied(tmp_path):
    # The client's SYN lost its window scale option (a middlebox); the server still offers 7.
    c = Conn()
    frames = c.handshake(1.0, rtt=0.02, ws=(None, 7))
    t = 1.03
    for _ in range(10):
        frames.append((t, c.send(0, ACK | PSH, MSS)))
        frames.append((t + 0.02, c.send(1, ACK, win=60000)))
        t += 0.021
    m = metrics_of(tmp_path, frames)
    assert m.window_scaling == "off" and m.receiver_wscale is None
    assert m.rwnd_max_bytes == 60000  # not 60000 << 7


def test_no_window_scaling_and_unknown_scale(tmp_path):
    tr = Transfer(wscale=None)
    tr.rounds([10 * MSS] * 3, rwnd=65535)
    m = metrics_of(tmp_path, tr.frames)
    assert m.window_scaling == "off" and m.receiver_wscale is None and m.rwnd_max_bytes == 65535
    # Without the handshake the scale is unknown: said plainly, windows left unscaled (raw).
    tr = Transfer()
    tr.rounds([10 * MSS] * 3, rwnd=1 << 20)
    m = metrics_of(tmp_path, tr.frames[3:])
    assert m.window_scaling == "unknown" and m.rwnd_unknown_scale
    assert math.isnan(m.rwnd_median_bytes) and (m.rwnd["raw"] == (1 << 20) >> 7).all()
    assert math.isnan(m.handshake_rtt_s) and m.vantage == "unknown"
    assert m.rtt_s == pytest.approx(0.02, abs=1e-4)  # from the data round trips instead


def test_request_response_breakdown(tmp_path):
    c = Conn()
    frames = [(t, p) for t, p in c.handshake(1.0, rtt=0.01)]
    t = 1.02
    for _ in range(3):
        frames.append((t, c.send(0, ACK | PSH, 200)))  # request
        frames.append((t + 0.005, c.send(1, ACK)))
        for i in range(4):  # the server thinks 30 ms, then answers with 4 segments
            frames.append((t + 0.035 + i * 1e-4, c.send(1, ACK | PSH, 1000)))
        frames.append((t + 0.045, c.send(0, ACK)))
        t += 0.1
    m = metrics_of(tmp_path, frames)
    assert m.sender == "server" and m.payload_bytes == 12000 and m.reverse_bytes == 600
    r = m.requests
    assert len(r) == 3
    assert r["request_bytes"].tolist() == [200] * 3 and r["response_bytes"].tolist() == [4000] * 3
    assert r["wait_s"].tolist() == pytest.approx([0.035] * 3)
    assert r["total_s"].tolist() == pytest.approx([0.0353] * 3)


def test_telemetry_for_the_flow(tmp_path):
    tr = Transfer()
    tr.clocked(10 * MSS, 50)
    tel = pd.DataFrame({
        "time": [1.0, 2.0, 1.0], "side": ["client"] * 3, "src": ["10.0.0.1", "10.0.0.1", "10.9.9.9"],
        "sport": [40000] * 3, "dst": ["10.0.0.2"] * 3, "dport": [5001] * 3, "cwnd": [10, 20, 99],
        "ssthresh": [5, 5, 5], "rtt": [0.02] * 3, "busy_s": [0.1, 0.2, 0.2], "rwnd_limited_s": [0.0, 0.05, 0.2],
        "sndbuf_limited_s": [0.05, 0.1, 0.0], "app_limited": [False, True, True]})
    m = metrics_of(tmp_path, tr.frames, telemetry=tel)
    s = m.telemetry_summary
    assert s["samples"] == 2 and s["cwnd_median"] == 15
    assert s["sndbuf_limited_share"] == pytest.approx(0.5) and s["rwnd_limited_share"] == pytest.approx(0.25)
    assert s["app_limited_share"] == 0.5


def test_flow_choice_and_bad_input(tmp_path):
    tr = Transfer()
    tr.rounds([5 * MSS] * 2)
    path = tmp_path / "m.pcap"
    write_pcap(path, tr.frames, linktype=101)
    table = read_packets(path)
    assert main_flow(table) == 0
    with pytest.raises(ValueError, match="no flow 4"):
        flow_metrics(table, 4)
    with pytest.raises(ParameterError, match="bin_s"):
        flow_metrics(table, bin_s=0)
    assert flow_metrics(table, bin_s=0.005).bin_s == 0.005


def test_resends_are_counted_by_sequence_coverage_too(tmp_path):
    # Fast retransmissions: Wireshark's count and the coverage count agree.
    tr = Transfer()
    for k in range(6):
        tr.round(20 * MSS, rwnd=1 << 20, lose=3 if k % 2 else None)
    m = metrics_of(tmp_path, tr.frames)
    assert m.retransmissions == 3 and m.resent_segments == 3 and m.resent_bytes == 3 * MSS
    assert m.resent_fraction == pytest.approx(3 / (6 * 20))
    assert list(m.resent["time"]) == list(m.retransmitted["time"])
    # Zero-window probes carry an old byte on purpose: not a resend.
    tr = Transfer()
    tr.rounds([20 * MSS] * 3)
    tr.zero_window(20 * MSS, closed_s=1.0)
    m = metrics_of(tmp_path, tr.frames)
    assert m.persist_probes > 0 and m.resent_segments == 0


def test_idle_time_stays_inside_the_transfer(tmp_path):
    # A transfer, then a connection left open: 150 s later a keep-alive (one old byte) and its ACK.
    tr = Transfer(rtt=0.02, mss=MSS)
    tr.rounds([20 * MSS] * 5)
    tr.idle(150)
    tr._emit(0, flags=ACK, length=1, seq=tr.conn.nxt[0] - 1, advance=False, win=tr._raw(64240))
    tr.t += 0.02
    tr._emit(1, win=tr._raw(1 << 20))
    m = metrics_of(tmp_path, tr.frames)
    assert m.transfer_s == pytest.approx(0.1, abs=0.002)
    # Only the waits for ACKs between the rounds count; the 150 s after the transfer do not.
    assert m.idle_s <= m.transfer_s and m.gaps["duration"].max() < 0.03


def test_one_answer_to_which_flow_and_which_way(tmp_path):
    # Flow 0 uploads 1000 bytes; flow 1 downloads 3000 (from its server, direction 1): the main
    # flow and its data direction are the same for the metrics, the plots and the cases.
    from tcplab.analysis.table import data_direction, flow_view

    small, big = Conn(client=("10.0.0.1", 40001)), Conn(client=("10.0.0.1", 40002))
    t0 = 1_700_000_000.0
    frames = small.handshake(t0, rtt=0.01, ws=(7, 7), mss=(1460, 1460), win=(64240, 65160), ack_win=502)
    frames += big.handshake(t0 + 0.001, rtt=0.01, ws=(7, 7), mss=(1460, 1460), win=(64240, 65160), ack_win=502)
    frames += [(t0 + 0.02, small.send(0, ACK | PSH, 1000, win=502)), (t0 + 0.03, small.send(1, ACK, win=509))]
    frames += [(t0 + 0.02 + 0.001 * i, big.send(1, ACK | PSH, 1000, win=509)) for i in range(3)]
    frames += [(t0 + 0.04, big.send(0, ACK, win=502))]
    path = tmp_path / "two.pcap"
    write_pcap(path, sorted(frames, key=lambda f: f[0]), linktype=101)
    table = read_packets(path)
    assert main_flow(table) == flow_metrics(table).flow == 1
    view, flow, direction = flow_view(table)
    assert (flow, direction) == (1, 1) and data_direction(view) == 1
    m = flow_metrics(table)
    assert (m.flow, m.data_dir, m.sender) == (1, 1, "server")
    assert goodput_series(table).sum() * goodput_series(table).attrs["bin_s"] / 8 == 3000
    assert data_direction(table.packets[table.packets["flow"] == 0]) == 0
    with pytest.raises(ValueError, match="no TCP packets"):
        main_flow(table.packets.iloc[0:0])
