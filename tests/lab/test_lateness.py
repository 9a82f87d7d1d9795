"""The delay line's lateness histogram; its snapshots are tested on a real path (test_path)."""

from __future__ import annotations

from tcplab.lab import lateness


def test_lateness_histogram_buckets_by_upper_edge(tmp_path):
    late = lateness.Lateness()
    for value in (0.0, 10e-6, 15e-6, 3e-3, 1.0):
        late.add(value)
    stats = late.to_dict()
    assert stats["late_hist"][0] == 2 and stats["late_hist"][1] == 1 and stats["late_hist"][-1] == 1
    assert sum(stats["late_hist"]) == 5 and stats["late_max_s"] == 1.0
    assert stats["late_total_s"] == sum((0.0, 10e-6, 15e-6, 3e-3, 1.0))
    # A helper that has exited answers no snapshot, and its controller learns that at once.
    assert lateness.request_snapshot(None, tmp_path / "none.json") == {}
