"""Case 12 helpers: what the queue's size and the line rate predict, and what a probe's round
trips say about the queue (synthetic runs: the case's own live runs are in test_course)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tcplab.analysis import theory
from tcplab.rooms import bloat

START = 1_700_000_000.0


def _trial(probes: list[tuple[float, float | None]], upload_s: float) -> SimpleNamespace:
    """A run whose upload began at START and lasted ``upload_s``, with ``probes`` as
    (seconds after START, round trip or None) the client recorded."""
    extra = {"sides": {"client": {"extra": {"probes": [[START + t, rtt] for t, rtt in probes]}}}}
    return SimpleNamespace(app=SimpleNamespace(start=START, end=START + upload_s, extra=extra))


def test_predictions_follow_from_the_queue_and_the_rate():
    p = bloat.Predictions(rtt_s=0.020, rate_bps=5e6, deep_bytes=128 * 1024, small_bytes=bloat.one_bdp_queue(5e6, 0.020))
    assert p.bdp_bytes == pytest.approx(12_500)
    assert p.small_bytes == 9 * 1514  # one BDP, in whole full-sized packets
    assert p.deep_full_s == pytest.approx(131_072 * 8 / 5e6)  # 209.7 ms
    assert p.small_full_s == pytest.approx(9 * 1514 * 8 / 5e6)
    assert p.frame_s == pytest.approx(1514 * 8 / 5e6)
    # After a loss cubic keeps 0.7 of BDP + queue in flight; what exceeds the BDP stays queued.
    assert p.deep_floor_s == pytest.approx((theory.CUBIC_BETA * (12_500 + 131_072) - 12_500) * 8 / 5e6)
    assert 0 < p.deep_floor_s < p.deep_full_s
    assert p.bbr_most_s == pytest.approx((12_500 + 9 * 1514) * 8 / 5e6)
    assert p.aqm_s == 0 and p.ceiling_bps == pytest.approx(5e6 * 1448 / 1514)
    assert bloat.one_bdp_queue(1e6, 0.001) == 2 * 1514  # two packets at least


def test_a_probe_view_reads_base_peak_and_standing_queue():
    # 0.5 s alone at 20 ms, then an upload of 2 s: the queue climbs to 200 ms in the first
    # second, then saws between 150 and 200 ms, back to 150 every 100 ms, and drains in the last
    # 0.15 s once the sender is done; one probe lost.
    probes = [(t, 0.020) for t in np.arange(-0.5, 0, 0.02)]
    for t in np.arange(0, 2.0, 0.02):
        delay = 0.2 * t if t < 1 else 0.15 + 0.05 * ((t * 10) % 1) if t < 1.85 else 0.0
        probes.append((t, 0.020 + delay))
    probes[40] = (probes[40][0], None)
    seen = bloat.view(_trial(probes, 2.0))
    assert seen.base == seen.floor == pytest.approx(0.020)
    assert seen.spread == pytest.approx(0.0)
    assert seen.peak == pytest.approx(0.207, abs=0.003)  # the highest median of 100 ms: at the top of the climb
    assert seen.peak_delay == pytest.approx(0.187, abs=0.003)
    assert seen.standing == pytest.approx(0.15)  # the least any probe waited in the second half: what never drained
    assert 0.15 < seen.median_delay < 0.2
    assert seen.lost == pytest.approx(1 / 100)
    assert seen.queue_bytes(5e6) == pytest.approx(seen.standing * 5e6 / 8)
    # The steady part: the second half less the last peak round trip (the drain), 1.0 to 1.77 s.
    assert len(seen.delays) == 39 and (seen.delays >= 0.149).all()
    frame = bloat.delay_frame({"deep FIFO": seen})
    assert list(frame.columns) == ["fix", "delay ms"] and len(frame) == 39


def test_a_queue_that_drains_reads_as_no_standing_queue():
    # Under an AQM the probe's fastest round trips beside the upload can beat its fastest alone by
    # a little noise: that is no queue, never a negative one.
    probes = [(t, 0.0203) for t in np.arange(-0.5, 0, 0.02)] + [(t, 0.0202) for t in np.arange(0, 2.0, 0.02)]
    seen = bloat.view(_trial(probes, 2.0))
    assert seen.standing == 0.0 and seen.queue_bytes(5e6) == 0.0
    assert seen.median_delay == pytest.approx(-0.0001)  # the waits themselves are as measured


def test_a_run_without_probes_reads_as_nothing_measured():
    seen = bloat.view(_trial([], 1.0))
    assert np.isnan(seen.base) and np.isnan(seen.peak) and np.isnan(seen.standing) and np.isnan(seen.lost)


def test_the_margin_is_the_repetitions_spread_where_there_are_some():
    assert bloat.spread_tolerance(0.005, [0.21]) == 0.005
    assert bloat.spread_tolerance(0.005, [0.20, 0.22, 0.24]) == pytest.approx(0.04)
    assert bloat.spread_tolerance(0.005, [0.210, 0.211]) == 0.005


def test_a_reading_of_the_fifo_at_its_fullest_allows_one_packet_more():
    """tbf's FIFO counts bytes: full is anywhere from its size less one packet to its size."""
    views = [SimpleNamespace(spread=0.0002, peak_delay=0.205, median_delay=0.1)]
    frame_s = 0.0024
    assert bloat.margin(views, "median_delay", frame_s) == pytest.approx(2 * frame_s + 0.0002)
    assert bloat.margin(views, "peak_delay", frame_s) == pytest.approx(3 * frame_s + 0.0002)
