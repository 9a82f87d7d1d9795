"""Case helpers for the socket-buffer cases, on synthetic tables with known answers."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pandas as pd

from tcplab.cases import buffers


def _packets(rows):
    cols = ["rel_time", "dir", "f_ack", "f_syn", "win", "wscale", "len", "flow"]
    return pd.DataFrame(rows, columns=cols)


def test_burst_starts_begin_after_each_silence():
    times = [0.0, 0.001, 0.002, 0.020, 0.021, 0.040, 0.0405]
    assert buffers.burst_starts(times, 0.005).tolist() == [0.0, 0.020, 0.040]
    assert buffers.burst_starts([], 0.005).size == 0


def test_burst_spacing_reads_the_sender_direction_of_the_largest_flow():
    rows = [(t + k * 0.035, 1, True, False, 1000, -1, 1448, 0) for k in range(5) for t in (0.0, 0.001, 0.002)]
    rows += [(t, 0, True, False, 1000, -1, 0, 0) for t in np.arange(0.0, 0.2, 0.003)]  # ACKs: no payload
    trial = SimpleNamespace(packets=SimpleNamespace(packets=_packets(rows)))
    assert abs(buffers.burst_spacing(trial) - 0.035) < 1e-9


def test_advertised_windows_skip_the_handshake_and_the_other_direction():
    pk = _packets([
        (0.00, 0, False, True, 64240, 7, 0, 0),   # SYN
        (0.01, 1, True, True, 65160, 0, 0, 0),    # SYN-ACK: wscale 0
        (0.02, 0, True, False, 500000, -1, 1448, 0),
        (0.03, 1, True, False, 8688, -1, 0, 0),
        (0.04, 1, True, False, 7240, -1, 0, 0),
    ])
    assert buffers.advertised_windows(pk, 1).tolist() == [8688, 7240]
    assert buffers.handshake_wscale(pk, 1) == 0 and buffers.handshake_wscale(pk, 0) == 7
    assert buffers.handshake_window(pk, 1) == 65160 and buffers.handshake_window(pk.iloc[2:], 1) is None
    no_option = pk.assign(wscale=-1)
    assert buffers.handshake_wscale(no_option, 1) is None


def test_scaling_ratios_in_order_of_appearance():
    trace = pd.DataFrame({"event": ["tcp_probe", "tcp_rcvbuf_grow", "tcp_rcvbuf_grow", "tcp_rcvbuf_grow"],
                          "scaling_ratio": [np.nan, 162, 162, 170]})
    assert buffers.scaling_ratios(trace) == [162, 170]
    assert buffers.scaling_ratios(pd.DataFrame()) == []


def test_send_wait_share_of_the_transfer():
    app = SimpleNamespace(extra={"sides": {"server": {"send_wait_s": 1.5}}})
    trial = SimpleNamespace(app=app, sender="server", duration_s=2.0)
    assert buffers.send_wait(trial) == {"send_wait_s": 1.5, "send_wait_share": 0.75}


def test_goodput_frame_groups_repetitions_under_one_variant():
    trials = [SimpleNamespace(label=f"16KB#{i}", goodput_bps=8e6 * i, duration_s=1.0) for i in (1, 2)]
    frame = buffers.goodput_frame(trials)
    assert frame["variant"].tolist() == ["16KB", "16KB"] and frame["goodput MB/s"].tolist() == [1.0, 2.0]


SENDMSG_TRACE = """\
# tracer: nop
      ZMQbg/IO/0-14311   [000] .....  1631.429905: tcp_sendmsg_locked: skb_addr 0000000000000000 skb_len 0 msg_left 8 size_goal 32768
          python-844     [000] .....  1631.646420: tcp_sendmsg_locked: skb_addr 0000000000000000 skb_len 0 msg_left 65536 size_goal 31856
          python-844     [000] .....  1631.646476: tcp_sendmsg_locked: skb_addr 000000001d0eacc2 skb_len 28960 msg_left 33680 size_goal 31856
          python-844     [000] .N...  1631.646518: tcp_sendmsg_locked: skb_addr 000000005f27b305 skb_len 31856 msg_left 19200 size_goal 31856
          python-844     [000] .....  1631.687400: tcp_sendmsg_locked: skb_addr 000000005f27b305 skb_len 100 msg_left 65536 size_goal 40544
          python-900     [000] .....  1631.687500: tcp_sendmsg_locked: skb_addr 0000000000000000 skb_len 0 msg_left 10 size_goal 40544
"""


def test_parse_sendmsg_keeps_the_busiest_python_process():
    events = buffers.parse_sendmsg(SENDMSG_TRACE)
    assert events["pid"].unique().tolist() == [844] and len(events) == 4
    assert events["addr"].iloc[0] == 0 and events["len"].tolist() == [0, 28960, 31856, 100]


def test_sendmsg_summary_tells_checked_new_buffers_from_unchecked_appends():
    summary = buffers.sendmsg_summary(buffers.parse_sendmsg(SENDMSG_TRACE), 2)
    assert summary["application writes"] == 2 and summary["copy-loop turns"] == 4
    assert summary["new buffer, write queue empty (checked)"] == 1
    assert summary["new buffer, tail full (checked)"] == 1
    assert summary["appended to an unfinished tail (not checked)"] == 2
    assert summary["tail full, per write"] == 0.5


def test_sendmsg_trace_leaves_no_instance_behind(root):
    from tcplab.observe import trace

    with buffers.sendmsg_trace() as read:
        assert "tracer" in read()
    mine = [p for p in (trace.TRACEFS / "instances").iterdir() if p.name.startswith(f"{trace.INSTANCE_PREFIX}{os.getpid()}-")]
    assert mine == []
