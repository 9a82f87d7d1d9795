"""tcpdump capture: listening before traffic, sees the SYN, counts what it wrote."""

from __future__ import annotations

import pytest

from .helpers import transfer
from tcplab.analysis import read_packets
from tcplab.lab import NetPath
from tcplab.observe.capture import Capture, CaptureError, CapturePoint, points_for


@pytest.mark.kernel
def test_capture_sees_the_handshake_and_counts_packets(root, tmp_path):
    port = 5321
    with NetPath(rtt="4ms") as path:
        points = points_for(path, "both", sender="server")
        with Capture(points, tmp_path, port) as capture:
            # start() returned: tcpdump is listening now, so the SYN cannot be missed.
            assert transfer(path, port, 300_000) == 300_000
        stats = {s.label: s for s in capture.stats}
    assert [p.label for p in points] == ["server-eth0", "client-eth0"]
    for label, stat in stats.items():
        table = read_packets(tmp_path / stat.file)
        packets = table.packets
        assert stat.captured == len(packets) > 200, label
        assert stat.dropped_by_kernel == 0 and not stat.limit_hit
        # Every packet the filter passed was read before tcpdump stopped (none lost at the end).
        assert stat.received_by_filter == stat.captured, stat
        first = packets.iloc[0]
        assert first.f_syn and not first.f_ack, "the first packet is the client's SYN"
        assert packets.len.sum() == 300_000
    assert any("listening on" in line for line in capture.logs["server-eth0"])


@pytest.mark.kernel
def test_router_points_and_packet_limit(root, tmp_path):
    port = 5322
    with NetPath(rtt="2ms") as path:
        points = points_for(path, "router", sender="server")
        with Capture(points, tmp_path, port, max_bytes=50 * (128 + 16)) as capture:
            transfer(path, port, 200_000)
    assert [s.label for s in capture.stats] == ["router-to-server", "router-to-client"]
    for stat in capture.stats:
        assert stat.packet_limit == 50 and stat.limit_hit and stat.captured == 50
        assert len(read_packets(tmp_path / stat.file).packets) == 50


@pytest.mark.kernel
def test_capture_on_a_missing_interface_fails_clearly(root, tmp_path):
    with NetPath() as path:
        with pytest.raises(CaptureError, match="nosuch"):
            Capture([CapturePoint(path.server, "nosuch0")], tmp_path, 5323, start_timeout=5).start()
