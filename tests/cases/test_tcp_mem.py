"""tcp_mem helpers on a synthetic trace (the real tracepoint is exercised by the case)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pandas as pd
import pytest

from tcplab.rooms import tcp_mem
from tcplab.observe.trace import parse_trace

TRACE = """\
 python3-1234 [000] ..... 100.500000: sock_exceed_buf_limit: proto:TCP sysctl_mem=64,96,128 allocated=252 sysctl_rmem=4096 rmem_alloc=0 sysctl_wmem=4096 wmem_alloc=1 wmem_queued=4096 kind=SK_MEM_SEND
 <idle>-0 [001] ..s.. 100.600000: sock_exceed_buf_limit: proto:TCP sysctl_mem=64,96,128 allocated=260 sysctl_rmem=4096 rmem_alloc=5000 sysctl_wmem=4096 wmem_alloc=1 wmem_queued=0 kind=SK_MEM_RECV
 <idle>-0 [001] ..s.. 100.700000: tcp_probe: src=10.0.0.1:5001 dest=10.0.0.2:4000 data_len=1448
"""


@dataclass
class FakeTrial:
    trace: pd.DataFrame
    packets: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(
        packets=pd.DataFrame({"time": [100.4, 101.0]})))
    telemetry: pd.DataFrame = field(default_factory=pd.DataFrame)


def test_limits_and_host_value():
    assert tcp_mem.limits("64 96 128") == {"low": 64, "pressure": 96, "high": 128}
    assert tcp_mem.limits("64,96,128")["high"] == 128
    assert len(tcp_mem.limits(tcp_mem.read_tcp_mem())) == 3


def test_exceed_summary_counts_kinds_and_first_event():
    trial = FakeTrial(parse_trace(TRACE))
    events = tcp_mem.exceed_events(trial)
    assert list(events["kind"]) == ["SK_MEM_SEND", "SK_MEM_RECV"]
    assert events["t"].iloc[0] == pytest.approx(0.1)
    summary = tcp_mem.exceed_summary(trial)
    assert summary["events"] == 2 and summary["SK_MEM_SEND"] == 1 and summary["SK_MEM_RECV"] == 1
    assert summary["first_allocated"] == 252 and summary["limits_seen"] == "64 / 96 / 128 pages"  # as the events table writes them
    assert summary["protocols"] == ["TCP"]


def test_events_table_gives_each_column_its_unit_and_writes_the_limits_as_the_case_does():
    trial = FakeTrial(parse_trace(TRACE))
    table = tcp_mem.events_table(trial)
    assert list(table.columns) == ["time s", "kind", "proto", "allocated pages", "tcp_mem in force",
                                   "rmem alloc B", "wmem queued B"]
    assert list(table["tcp_mem in force"]) == ["64 / 96 / 128 pages"] * 2  # not the trace's "64,96,128"
    assert table["time s"].iloc[0] == pytest.approx(0.1)
    assert list(tcp_mem.events_table(trial, first=1)["kind"]) == ["SK_MEM_SEND"]  # the first, as recorded
    assert tcp_mem.limits_text("190857 254478 381714") == "190\u202f857 / 254\u202f478 / 381\u202f714 pages"
    assert tcp_mem.events_table(FakeTrial(parse_trace(""))).empty


def test_the_limits_cell_is_translated_by_its_key():
    from tcplab.report.tables import cell_text
    from tcplab.words import Messages

    assert cell_text("64 / 96 / 128 pages", Messages("zh")) == "64 / 96 / 128 页"


def test_no_events():
    summary = tcp_mem.exceed_summary(FakeTrial(parse_trace("")))
    assert summary["events"] == 0 and summary["first_t"] is None


def test_receiver_clamp_in_segments():
    tel = pd.DataFrame({"time": [1.0, 2.0], "side": "client", "state": "ESTAB", "rcv_ssthresh": [64088, 5792],
                        "skmem_rb": [131072, 131072], "advmss": [1448, 1448]})
    clamp = tcp_mem.receiver_clamp(FakeTrial(pd.DataFrame(), telemetry=tel))
    assert list(clamp["segments"].round(1)) == [44.3, 4.0]


def test_ballast_holds_memory_and_lets_go():
    with tcp_mem.Ballast("1MB") as ballast:
        held = ballast.held()
        assert ballast.sent == held["written"] == 1 << 20
        # held() waits until no byte counts at both ends (received, its acknowledgement not yet
        # processed by the sender): then the two queues add up to what was written
        assert held["unread"] + held["unacknowledged"] == held["written"]
    assert ballast.held() == {"written": 1 << 20, "unread": 0, "unacknowledged": 0}


def test_pressure_counters_sum_both_ends():
    moved = {"client": {"TcpExtTCPRcvQDrop": 67, "TcpExtPruneCalled": 228}, "server": {"TcpExtTCPMemoryPressures": 1}}
    trial = SimpleNamespace(counters=lambda side: moved[side])
    assert tcp_mem.pressure_counters(trial) == {"TcpExtTCPMemoryPressures": 1, "TcpExtTCPRcvQDrop": 67}
