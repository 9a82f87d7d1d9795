"""Captures of real Linux TCP, made with tcpdump in a private network namespace, read by
the engine and compared with tshark cell by cell."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcplab.lab import netns as lab_netns


pytestmark = pytest.mark.kernel
TRAFFIC = Path(__file__).with_name("live_traffic.py")


def _run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, **kw)


@pytest.fixture
def netns(root):
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump is not installed")
    name = f"tcplab-h1-{os.getpid()}"
    # Created as the lab creates its own, with its owner recorded: a test run beside this one
    # (a developer's, CI's) then knows the namespace is not its leftover.
    lab_netns.create(name)
    try:
        _run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        # Ethernet-sized segments instead of 64 KB loopback super-packets.
        _run(["ip", "-n", name, "link", "set", "lo", "mtu", "1500"], check=True)
        if shutil.which("ethtool"):
            _run(["ip", "netns", "exec", name, "ethtool", "-K", "lo", "tso", "off", "gso", "off"])
        yield name
    finally:
        # Everything inside this namespace was started by the test.
        for pid in _run(["ip", "netns", "pids", name]).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        lab_netns.remove(name)


def capture(ns: str, path: Path, scenario: str, address: str, *, iface: str = "lo", extra=(),
            bpf: str = "tcp") -> None:
    # --immediate-mode: without it tcpdump takes packets from the kernel in blocks and
    # leaves the last, partly filled block behind when it is stopped.
    dump = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "--immediate-mode", "-i", iface, "-s", "96",
                             "-U", "-w", str(path),
                             *extra, bpf], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        heard = b""
        fd = dump.stderr.fileno()
        while b"listening on" not in heard:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                raise RuntimeError(f"tcpdump did not start: {heard.decode(errors='replace')}")
            heard += chunk
        traffic = subprocess.run(["ip", "netns", "exec", ns, sys.executable, str(TRAFFIC), scenario, address, "5001"],
                                 capture_output=True, text=True, timeout=60)
        assert traffic.returncode == 0, traffic.stderr
        time.sleep(0.5)  # let the last packets reach the capture
    finally:
        dump.send_signal(signal.SIGTERM)
        try:
            dump.wait(10)
        except subprocess.TimeoutExpired:
            dump.kill()
            dump.wait()
        dump.stderr.close()


def drop_randomly(ns: str, chain: str, share: float, ipv6: bool = False) -> None:
    _run(["ip", "netns", "exec", ns, "ip6tables" if ipv6 else "iptables", "-A", chain, "-p", "tcp",
          "-m", "statistic", "--mode", "random", "--probability", str(share), "-j", "DROP"], check=True)


# About 1 packet in 64 left out of the capture (chosen by the IPv4 ID, or for IPv6 by the
# sum of the second-lowest bytes of the TCP sequence and acknowledgement numbers), as a
# capture that cannot keep up loses packets: the analysis then sees holes ("previous segment
# not captured", "ACKed unseen segment"). Packets dropped before the capture point would not
# do: Linux knows about a local drop and sends the segment again as if it had never left.
# IPv6 has no per-packet ID, and each number alone is constant in one direction (the sender's
# ACK, the receiver's sequence): the sequence byte alone dropped every ACK 1 time in 64. SYNs
# are always kept: the handshake must be seen (random ISNs would drop it 1 time in 64).
SKIP_SOME = {"127.0.0.1": "tcp and ((ip[5] & 0x3f) != 7 or (tcp[13] & 2) != 0)",
             "::1": "tcp and (((ip6[46] + ip6[50]) & 0x3f) != 7 or (ip6[53] & 2) != 0)"}


@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_bulk_transfer_with_loss(netns, tmp_path, address, matches_tshark):
    # Dropped after the capture point: the capture shows originals and retransmissions.
    drop_randomly(netns, "INPUT", 0.02, ipv6=":" in address)
    path = tmp_path / "bulk.pcap"
    capture(netns, path, "bulk", address, bpf=SKIP_SOME[address])
    table = matches_tshark(path)
    p = table.packets
    assert table.flows["handshake"].all() and table.flows["window_scaling"].eq("on").all()
    assert table.flows["bytes_c2s"].iloc[0] >= 2_500_000
    for column in ("retransmission", "lost_segment"):
        assert p[column].any(), column
    if address == "::1":
        # 96 bytes end inside the SACK option of IPv6 duplicate ACKs: Wireshark stops at
        # the cut and shows no analysis for them, and neither do we.
        assert (p["snaplen_truncated"] & (p["sack_le1"] >= 0)).any()
        assert not p.loc[p["snaplen_truncated"], "dup_ack"].any()
    else:
        assert p["dup_ack"].any() and p["fast_retransmission"].any() and (p["sack_count"] > 0).any()
    assert p["ack_rtt"].notna().sum() > 100


def test_receiver_that_stops_reading(netns, tmp_path, matches_tshark):
    path = tmp_path / "zerowin.pcap"
    capture(netns, path, "zerowin", "127.0.0.1")
    p = matches_tshark(path).packets
    for column in ("zero_window", "window_update", "window_full"):
        assert p[column].any(), column
    # Linux probes a zero window with an empty segment one byte below the window, which
    # Wireshark calls a keep-alive (its "zero window probe" carries one byte).
    assert p["keep_alive"].any() and not p["zero_window_probe"].any()


def test_keep_alives_captured_on_any_interface(netns, tmp_path, matches_tshark):
    path = tmp_path / "keepalive.pcap"
    capture(netns, path, "keepalive", "127.0.0.1", iface="any", extra=("-y", "LINUX_SLL2"))
    table = matches_tshark(path)
    assert table.source.link_types == (276,)
    assert table.packets["keep_alive"].sum() >= 2 and table.packets["keep_alive_ack"].sum() >= 2
