"""Case 04 helpers: predicted latencies, latency statistics, and reading a real stalled run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tcplab.cases import CaseLab
from tcplab.rooms import nagle
from tcplab.lab import PathSpec
from tcplab.traffic import Reqresp


def test_predicted_latency_is_two_rtt_plus_ato_only_for_split_writes_with_nagle():
    assert nagle.predicted_latency(0.002, [16, 1000]) == pytest.approx(0.044)
    assert nagle.predicted_latency(0.002, [16, 1000], nodelay=True) == pytest.approx(0.002)
    assert nagle.predicted_latency(0.020, [1016]) == pytest.approx(0.020)
    assert nagle.predicted_latency(0.002, [100_000]) == pytest.approx(0.002)  # Minshall: no stall


def test_latency_table_leaves_out_the_warmup_requests():
    requests = [{"latency": 0.002}] * 3 + [{"latency": 0.048}] * 5
    trial = SimpleNamespace(app=SimpleNamespace(requests=requests))
    table = nagle.latency_table({"split": trial}, {"split": 0.044})
    assert table.loc["split", "requests"] == 5
    assert table.loc["split", "median ms"] == pytest.approx(48)
    assert table.loc["split", "predicted ms"] == pytest.approx(44)


@pytest.mark.kernel
def test_split_request_with_nagle_waits_for_the_delayed_ack(root, tmp_path):
    lab = CaseLab("97-nagle-fixture", runs_dir=tmp_path)
    with lab.path(PathSpec(rtt="2ms", rate="100mbit")) as path:
        stalled = lab.run("split", Reqresp(requests=10, request_size=500, response_size=100, split=True,
                                           cc="cubic"), path=path)
        quick = lab.run("nodelay", Reqresp(requests=10, request_size=500, response_size=100, split=True,
                                           nodelay=True, cc="cubic"), path=path)
    gaps = nagle.header_body_gaps(stalled)
    assert len(gaps) == 10 - nagle.WARMUP
    assert (gaps.gap_ms >= 30).all() and gaps.pure_ack.all() and (gaps.body_after_ack_ms < 1).all()
    assert nagle.latencies_ms(quick).max() < 10 <= 30 < nagle.latencies_ms(stalled).min()
    assert nagle.segments_per_request(stalled) == pytest.approx(2, abs=0.2)
    assert nagle.ato_ms(stalled).median() >= 40
    assert nagle.tcp_settings(stalled)["net.ipv4.tcp_autocorking"] in ("0", "1")
    assert stalled.counters("server")["TcpExtDelayedACKs"] >= 5
