"""Tracepoints in a private tracefs instance: events for a transfer, degrade when absent."""

from __future__ import annotations

import time

import pytest

from .helpers import transfer
from tcplab.lab import NetPath, tracefs
from tcplab.observe import trace
from tcplab.observe.trace import Tracepoints, parse_trace

SAMPLE = (
    "          <idle>-0       [001] ..s2. 4711.123456: tcp_probe: family=AF_INET src=10.201.2.2:5301 "
    "dest=10.201.1.2:4000 mark=0x0 data_len=1448 snd_nxt=0x1a snd_una=0x10 snd_cwnd=10 ssthresh=2147483647 "
    "snd_wnd=65536 srtt=10323 rcv_wnd=64512 sock_cookie=3f1 skbaddr=000000005fc0c966 skaddr=000000008467c05f\n"
    "   python3-123   [000] ..... 4711.5: tcp_rcvbuf_grow: time=900 rtt_us=20000 copied=1 inq=0 space=2 "
    "ooo=0 scaling_ratio=128 rcvbuf=4 rcv_ssthresh=5 window_clamp=6 rcv_wnd=7 family=AF_INET sport=5301 "
    "dport=4000 saddr=10.0.0.1 daddr=10.0.0.2 saddrv6=::ffff:10.0.0.1 daddrv6=::ffff:10.0.0.2 skaddr=00000000ab "
    "sock_cookie=3f1\n"
)


def test_parse_trace_sample():
    df = parse_trace(SAMPLE, clock_offset=1000.0)
    assert list(df.event) == ["tcp_probe", "tcp_rcvbuf_grow"]
    assert df.time.tolist() == pytest.approx([5711.123456, 5711.5])
    probe, grow = df.iloc[0], df.iloc[1]
    assert probe.snd_nxt == 0x1a and probe.snd_cwnd == 10 and probe.src == "10.201.2.2:5301"
    assert probe.sock_cookie == grow.sock_cookie == 0x3f1
    assert probe.skaddr == "000000008467c05f"
    assert grow.time_field == 900 and grow.rcvbuf == 4


def _kernel_traces() -> bool:
    """Whether this kernel has tracefs: Debian's UML kernel (6.1) is built without tracing."""
    return tracefs.ensure_tracefs()


@pytest.mark.kernel
def test_tcp_probe_events_for_a_transfer(root):
    port = 5331
    if not _kernel_traces():
        # This kernel's own expectation: the transfer runs, every event says why it is missing.
        with NetPath(rtt="4ms") as path, Tracepoints(port) as tracer:
            assert transfer(path, port, 500_000) == 500_000
        assert set(tracer.availability.values()) == {"not available: no tracefs"} and tracer.frame().empty
        return
    with NetPath(rtt="4ms") as path:
        started = time.time()
        with Tracepoints(port) as tracer:
            instance = tracefs.TRACEFS / "instances" / tracer.name
            assert instance.is_dir()
            transfer(path, port, 500_000)
        ended = time.time()
        df = tracer.frame()
    assert not instance.exists()
    assert tracer.availability["tcp_probe"] == "recorded"
    probes = df[df.event == "tcp_probe"]
    assert len(probes) > 100
    # The port filter held: every probe belongs to this connection.
    ports = probes.src.str.rsplit(":", n=1).str[1].astype(int)
    peer_ports = probes.dest.str.rsplit(":", n=1).str[1].astype(int)
    assert ((ports == port) | (peer_ports == port)).all()
    # Monotonic kernel stamps converted to the epoch land inside the test's own wall-clock window.
    assert probes.time.between(started, ended).all()
    assert tracer.summary()["overrun"] == 0


@pytest.mark.kernel
def test_missing_event_is_recorded_not_fatal(root, monkeypatch):
    monkeypatch.setitem(trace.EVENTS, "tcp_no_such_event", trace.Event("tcp", "tcp_no_such_event", True))
    with Tracepoints(5332, events=["tcp_probe", "tcp_no_such_event"]) as tracer:
        pass
    assert tracer.availability["tcp_probe"] == ("recorded" if _kernel_traces() else "not available: no tracefs")
    assert tracer.availability["tcp_no_such_event"].startswith("not available")


def test_no_tracefs_degrades(monkeypatch, tmp_path):
    monkeypatch.setattr(tracefs, "TRACEFS", tmp_path / "absent")
    with Tracepoints(5333) as tracer:
        pass
    assert set(tracer.availability.values()) == {"not available: no tracefs"}
    assert tracer.frame().empty


def test_cleanup_spares_live_owners_and_removes_dead(root, tmp_path, monkeypatch):
    monkeypatch.setattr(tracefs, "TRACEFS", tmp_path)
    live = tmp_path / "instances" / "tcplab-1-aaaaaa"  # pid 1 is always alive
    dead = tmp_path / "instances" / f"tcplab-{2**22 + 7}-bbbbbb"
    for directory in (live, dead):
        directory.mkdir(parents=True)
    assert tracefs.cleanup_instances() == [dead.name]
    assert live.is_dir()
    assert tracefs.cleanup_instances(force=True) == [live.name]
