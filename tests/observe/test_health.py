"""Run health: the delay line's lateness per run, CPU pressure and steal, and the verdict."""

from __future__ import annotations

import os
import time

import pytest

from tcplab.lab.lateness import LATE_EDGES_S
from tcplab.observe import health


def _snapshot(hist):
    return {"late_edges_s": list(LATE_EDGES_S), "late_hist": list(hist)}


def test_late_quantiles_count_only_the_packets_between_two_snapshots():
    before = _snapshot([5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]) | {"late_total_s": 0.001}
    # 98 packets within 10 µs, one at 1-2 ms, one beyond the histogram (> 100 ms).
    after = _snapshot([103, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]) | {"late_total_s": 0.201}
    late = health.late_quantiles(before, after)
    assert late["count"] == 100 and late["late_p50_s"] == 10e-6 and late["late_mean_s"] == pytest.approx(2e-3)
    assert late["late_p99_s"] == 2e-3 and late["late_worst_s"] == 100e-3


def test_late_quantiles_without_snapshots_or_packets():
    assert health.late_quantiles({}, _snapshot([0] * 14)) is None
    assert health.late_quantiles(_snapshot([3] + [0] * 13), _snapshot([3] + [0] * 13)) == {"count": 0}


def test_verdict_names_each_reading_beyond_its_limit():
    # Rare spikes (p99 of 5 ms) with a small mean: the round trips the checks read are unchanged.
    calm = {"delay_line": {"queue1": {"count": 500, "late_mean_s": 60e-6, "late_p50_s": 10e-6, "late_p99_s": 5e-3}},
            "cpu_steal_share": 0.0, "cpu_waiting_share": 0.3}
    assert health.verdict(calm) == []
    busy = {"delay_line": {"queue1": {"count": 50, "late_mean_s": 1.5e-3, "late_p50_s": 1e-3, "late_p99_s": 5e-3},
                           "queue2": None},
            "cpu_steal_share": 0.2}
    reasons = health.verdict(busy)
    assert len(reasons) == 3
    assert reasons[0] == "delay line queue1: packets released 1.5 ms late on average (limit 0.5 ms)"
    assert "queue2" in reasons[1] and "starved" in reasons[1] and "20%" in reasons[2]


def test_cpu_shares_of_a_busy_second_on_this_machine():
    before = health.read_cpu()
    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # keep one CPU busy: some share of it was used, none stolen by us
        pass
    after = health.read_cpu()
    shares = health.cpu_shares(before, after)
    if os.path.exists(health.PSI_CPU):
        assert shares["cpu_waiting_share"] is not None and 0.0 <= shares["cpu_waiting_share"] <= 1.0
    else:
        assert shares["cpu_waiting_share"] is None
    assert shares["cpu_steal_share"] is not None and 0.0 <= shares["cpu_steal_share"] < 1.0
    assert after.total > before.total


def test_cpu_shares_without_psi():
    a = health.CpuReading(0.0, None, 10, 1000)
    b = health.CpuReading(1.0, None, 30, 1200)
    assert health.cpu_shares(a, b) == {"cpu_waiting_share": None, "cpu_steal_share": pytest.approx(0.1)}


def test_group_run_delay_reads_this_process_group():
    waits = health.group_run_delay(os.getpgrp())
    assert os.getpid() in waits and all(ns >= 0 for ns in waits.values())
    assert health.group_run_delay(2**22 + 12345) == {}  # no such group


def test_wait_share_counts_new_processes_whole_and_judges_a_uml_kernel():
    before, after = {10: 1_000_000_000}, {10: 1_300_000_000, 11: 100_000_000}
    assert health.wait_share(before, after, 2.0) == pytest.approx(0.2)
    assert health.wait_share(before, {}, 2.0) is None
    limit = health.LIMITS["uml_cpu_wait_share"]
    assert health.judged({"disturbed": []}, uml_cpu_wait_share=limit / 2)["disturbed"] == []
    (reason,) = health.judged({"disturbed": []}, uml_cpu_wait_share=limit * 2)["disturbed"]
    assert reason.startswith("the UML kernel's processes waited")


def test_the_lab_programs_lateness_judges_a_run_past_half_of_it():
    limit = health.LIMITS["programs_late_share"]
    assert health.verdict({"programs_late_share": limit * 0.9}) == []
    assert health.verdict({"programs_late_share": 0.88}) == [
        "the lab kernel ran its programs late for 88% of the run (the ss sampler's schedule; limit 50%)"]
    assert health.verdict({"programs_late_share": None}) == []


def test_base_rtt_allows_the_emulations_floor_and_a_packet_each_way():
    import pandas as pd

    from tcplab.lab import PathSpec

    spec = PathSpec(rtt="20ms", rate="10mbit")
    samples = pd.DataFrame({"side": ["client", "server", "server"], "minrtt": [0.0212, 0.0205, float("nan")]})
    base = health.base_rtt(spec, samples)
    # 20 ms + a 1500-byte packet each way at 10 Mbit/s (2.4 ms) + 10 % of 20 ms.
    assert base == {"configured_s": pytest.approx(0.020), "min_rtt_s": 0.0205, "allowed_s": pytest.approx(0.0244)}
    assert health.verdict({"base_rtt": base}) == []
    slow = {**base, "min_rtt_s": 0.031}
    assert health.verdict({"base_rtt": slow}) == [
        "no round trip of the run was below 31 ms on a path of 20 ms (limit 24.4 ms)"]
    # Unshaped and without delay: the floor of 1 ms.
    assert health.base_rtt(PathSpec(), samples.assign(minrtt=0.0004))["allowed_s"] == pytest.approx(0.001)
    assert health.base_rtt(spec, None) is None and health.base_rtt(spec, samples.drop(columns="minrtt")) is None
    assert health.base_rtt(spec, samples.assign(minrtt=float("nan"))) is None
