"""The path on the real kernel: built as asked, measured, and always torn down."""

import json
import re
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from tcplab.units import ParameterError

from tcplab.lab import NetPath, fidelity, link, netns, sysctl
from tcplab.lab.cleanup import cleanup
from tcplab.lab.link import netem_available
from tcplab.observe import health

pytestmark = pytest.mark.kernel


def test_builds_three_namespaces_with_addresses_routes_and_forwarding(root):
    with NetPath(mtu=1400) as path:
        for host in (path.client, path.router, path.server):
            assert netns.exists(host.ns)
        assert path.router.sysctl("net.ipv4.ip_forward") == "1"
        links = path.client.run(["ip", "-j", "addr", "show", "eth0"]).stdout
        info = json.loads(links)[0]
        assert info["mtu"] == 1400
        assert any(a["local"] == path.client.address for a in info["addr_info"])
        route = path.server.run(["ip", "route", "show", "default"]).stdout
        assert "via 10.201.2.1" in route
        ping = path.client.run(["ping", "-c", "1", "-W", "2", path.server.address], check=False)
        assert ping.returncode == 0, ping.stdout
    for host in (path.client, path.router, path.server):
        assert not netns.exists(host.ns)


def test_offloads_are_off_by_default_and_kept_on_request(root):
    def gso(path):
        text = path.client.run(["ethtool", "-k", "eth0"]).stdout
        return {line.split(":")[0].strip(): line.split(":")[1].split()[0]
                for line in text.splitlines() if ":" in line and line.split(":")[1].strip()}

    with NetPath() as path:
        features = gso(path)
        assert features["tcp-segmentation-offload"] == "off"
        assert features["generic-segmentation-offload"] == "off"
        assert features["generic-receive-offload"] == "off"
    with NetPath(offloads=True) as path:
        assert gso(path)["generic-segmentation-offload"] == "on"


@pytest.mark.lifecycle
def test_two_paths_at_once_do_not_collide(root):
    with NetPath() as one, NetPath() as two:
        assert one.client.ns != two.client.ns
        for path in (one, two):
            assert path.client.run(["ping", "-c", "1", "-W", "2", path.server.address], check=False).returncode == 0


def test_netem_probe_agrees_with_tc(root):
    """The automatic backend choice rests on this probe: check it against tc itself."""
    name = f"{netns.PREFIX}t-probe-{os.getpid()}"
    netns.create(name)
    try:
        netns.run(name, ["ip", "link", "set", "lo", "up"])
        tc = netns.run(name, ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"], check=False)
    finally:
        netns.remove(name)
    assert netem_available() == (tc.returncode == 0)
    with NetPath(rtt="2ms") as path:
        assert path.backend == ("netem" if tc.returncode == 0 else "delayline")
        assert path.describe()["backend"] == path.backend


def test_round_trip_time_over_tcp_matches_configuration(root):
    with NetPath(rtt="20ms") as path:
        floor = fidelity.tcp_rtt(path, count=30, loopback=True)
        result = fidelity.tcp_rtt(path, count=30)
    # The emulator may only add time (scheduling), never remove it. Every round trip the
    # application times also carries the lab kernel's own socket calls and wake-ups, which its
    # loopback round trip measures (about 0.1 ms on the host; in UML, whose system calls go
    # through ptrace, 0.3 ms and more on a slow day); 1.5 ms beyond both is a generous ceiling
    # for a loaded 2-core CI machine. The benchmark measures the real error.
    assert 0.0199 <= result.minimum
    assert result.median <= 0.020 + floor.median + 0.0015, (result.median, floor.median)
    assert 0.0195 <= result.kernel_min_rtt <= 0.0215


def test_the_first_packet_waits_no_longer_than_the_rest(root):
    # netem delays ARP too: without pinned neighbours the first ping would take 40 ms here.
    with NetPath(rtt="20ms") as path:
        out = path.client.run(["ping", "-c", "3", "-i", "0.2", path.server.address]).stdout
        states = path.router.run(["ip", "neigh", "show"]).stdout
    first = float(re.search(r"time=([\d.]+) ms", out).group(1))
    # An ARP exchange through netem would add at least one one-way delay (10 ms); 5 ms of
    # room is for a busy host, which may deliver any packet a little late.
    assert 19.9 <= first <= 25.0, out
    assert states.count("PERMANENT") == 2, states


def test_delay_line_runs_in_any_kernel(root):
    """The userspace delay line, asked for by name: on the host it is the default, in the UML
    kernel it needs the iptables front end that kernel accepts (the legacy one)."""
    with NetPath(rtt="10ms", backend="delayline") as path:
        assert path.backend == "delayline"
        floor = fidelity.tcp_rtt(path, count=20, loopback=True)
        before = path.emulation_snapshot()
        result = fidelity.tcp_rtt(path, count=20)
        after = path.emulation_snapshot()
    # A snapshot between two moments counts the packets released in between, and how late.
    assert set(before) == set(after) and len(after) == 2, (before, after)
    lates = [health.late_quantiles(before[queue], after[queue]) for queue in after]
    for late in lates:
        assert late["count"] >= 20 and 0 <= late["late_p50_s"] <= late["late_p99_s"] <= late["late_worst_s"], late
    # The delay line may only add time: the lab kernel's own socket calls and wake-ups (its
    # loopback round trip, just measured) and its own typical lateness each way (its record),
    # as test_round_trip_time_over_tcp_matches_configuration allows, and 1.5 ms beyond. A fixed
    # 12.5 ms failed in a fresh clone's UML leg on a day the hypervisor stole 7-13 % of the CPU
    # (median 13.2 ms).
    typical_late = sum(late["late_p50_s"] for late in lates)
    assert 0.0099 <= result.minimum
    assert result.median <= 0.010 + floor.median + typical_late + 0.0015, (result.median, floor.median, lates)
    assert len(path.link_stats) == 2, path.link_stats  # the delay line's own counters, each way
    assert all(q["received"] > 0 and "late_max_s" in q for q in path.link_stats.values()), path.link_stats


def test_an_aqm_is_built_where_the_kernel_has_it_and_refused_before_anything_where_not(root):
    """The AQM probe agrees with tc; a kernel that has the qdisc gets it as tbf's child, one that
    lacks it (this host: no fq_codel, no cake) refuses the path by the parameter's name, with no
    namespace made. The UML leg of make test runs this inside the 6.1 kernel, which has both."""
    name = f"{netns.PREFIX}t-aqm-{os.getpid()}"
    netns.create(name)
    try:
        netns.run(name, ["ip", "link", "set", "lo", "up"])
        has = {kind: netns.run(name, ["tc", "qdisc", "replace", "dev", "lo", "root", kind], check=False).returncode == 0
               for kind in link.AQMS}
    finally:
        netns.remove(name)
    assert link.aqms_available() == [kind for kind in link.AQMS if has[kind]]
    for kind in link.AQMS:
        if has[kind]:
            with NetPath(rtt="2ms", rate="10mbit", aqm=kind) as path:
                shown = path.router.run(["tc", "qdisc", "show", "dev", "to-server"]).stdout
                assert f"qdisc {kind} 20: parent" in shown and "qdisc tbf" in shown, shown
                assert path.client.run(["ping", "-c", "1", "-W", "2", path.server.address], check=False).returncode == 0
            continue
        before = set(netns.listed())
        with pytest.raises(ParameterError, match=f"has no sch_{kind} qdisc") as info:
            NetPath(rtt="2ms", rate="10mbit", aqm=kind).start()
        assert info.value.name == "aqm" and set(netns.listed()) == before


def test_a_namespace_whose_maker_did_not_answer_is_not_left_behind(root, monkeypatch):
    # pyroute2 forks a child to make a namespace and waits for its answer; a slow kernel's child
    # (UML, 2026-11-29) made it and answered late, and the namespace stayed.
    from pyroute2 import config

    assert config.default_communicate_timeout >= 30  # the wait that a slow UML kernel needs
    name = f"{netns.PREFIX}t-late-{os.getpid()}"
    made = netns._pr_netns.create

    def late(ns, *args):
        made(ns, *args)
        raise TimeoutError("no response from the child")

    monkeypatch.setattr(netns._pr_netns, "create", late)
    with pytest.raises(TimeoutError):
        netns.create(name)
    assert not netns.exists(name) and netns.owner_of(name) is None


def test_rate_limit_holds(root):
    with NetPath(rtt="4ms", rate="20mbit") as path:
        put = fidelity.goodput(path, seconds=2, skip=0.5)
    # TCP payload over 1514-byte frames is at most 95.6 % of the line rate.
    assert 0.80 * 20e6 <= put.bits_per_second <= 0.97 * 20e6
    assert put.cc == "cubic"


def test_goodput_counts_what_arrived_read_or_not():
    # A reader the machine keeps waiting leaves bytes in its queue: they arrived, and the count
    # (the bytes read so far and those queued) says so between two clock readings.
    server = socket.create_server(("127.0.0.1", 0))
    with server, socket.create_connection(server.getsockname()) as reader:
        writer, _ = server.accept()
        with writer:
            writer.sendall(b"x" * 5000)
            deadline = time.monotonic() + 2
            while fidelity._arrived(reader, 0)[1] < 5000 and time.monotonic() < deadline:
                time.sleep(0.01)
            before, arrived, after = fidelity._arrived(reader, 0)
            assert arrived == 5000 and before <= after
            taken = len(reader.recv(3000))
            assert fidelity._arrived(reader, taken)[1] == 5000  # read or queued, the same bytes


def test_the_bare_ack_filter_drops_only_segments_without_payload(root, tmp_path):
    # A download toward a client behind the filter: every data segment arrives; what dies is the
    # server's bare ACK of the client's FIN (and of its retransmissions).
    from tcplab.traffic import Bulk

    with NetPath(rtt="2ms", drop_bare_acks_to="client") as path:
        result = Bulk(size="256KB").run(path, tmp_path)
        deadline = time.monotonic() + 2
        while (dropped := path.dropped_bare_acks()) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert result.ok and result.bytes == 256 * 1024, result.error
    assert 1 <= dropped <= 5, dropped


def test_loss_drops_the_configured_share(root):
    with NetPath(rtt="2ms", loss="10%") as path:
        path.client.run(["ping", "-c", "400", "-i", "0.002", "-q", path.server.address], check=False)
    stats = path.link_stats
    assert len(stats) == 2, stats  # one counter set per direction, from either backend
    for queue in stats.values():
        share = queue["dropped"] / queue["received"]
        assert 0.05 <= share <= 0.15, queue


def test_jitter_spreads_round_trips(root):
    with NetPath(rtt="20ms", jitter="4ms") as path:
        result = fidelity.tcp_rtt(path, count=40)
    spread = max(result.samples) - min(result.samples)
    assert spread >= 0.003
    # netem never releases a packet early, so the floor (20 - 2 x 4 ms) is hard; a busy host
    # may deliver any one packet late, so the ceiling (20 + 2 x 4 ms, plus 3.5 ms) holds for
    # nine samples in ten, not for the slowest one.
    p90 = sorted(result.samples)[int(0.9 * len(result.samples)) - 1]
    assert 0.011 <= min(result.samples) and p90 <= 0.0315, result.samples


def test_namespace_sysctls_and_route_options_are_applied(root):
    with NetPath(sysctls={"tcp_window_scaling": 0, "tcp_slow_start_after_idle": 0}, initcwnd=4, initrwnd=20,
                 ssthresh=20) as path:
        for host in (path.client, path.server):
            assert host.sysctl("tcp_window_scaling") == "0"
            assert host.sysctl("tcp_slow_start_after_idle") == "0"
            route = host.run(["ip", "route", "show", "default"]).stdout
            assert "initcwnd 4" in route and "initrwnd 20" in route
            assert "ssthresh lock 20" in route, route  # locked, as `ip route … ssthresh lock 20` sets it
        # the host's own value is untouched
        assert sysctl.read("net.ipv4.tcp_window_scaling") == "1"


def test_side_sysctls_apply_to_one_side_only(root):
    with NetPath(side_sysctls={"server": {"tcp_window_scaling": 0}}) as path:
        assert path.server.sysctl("tcp_window_scaling") == "0"
        assert path.client.sysctl("tcp_window_scaling") == "1"
    assert sysctl.read("net.ipv4.tcp_window_scaling") == "1"


def test_cc_outside_the_allowed_list_is_allowed_for_the_run_only(root):
    before = sysctl.read("net.ipv4.tcp_allowed_congestion_control")
    target = next(cc for cc in sysctl.read("net.ipv4.tcp_available_congestion_control").split()
                  if cc not in before.split() or cc == "cubic")
    with NetPath(cc=target) as path:
        assert path.client.sysctl("tcp_congestion_control") == target
    assert sysctl.read("net.ipv4.tcp_allowed_congestion_control") == before


def test_host_guard_changes_and_restores(root):
    before = sysctl.read("net.core.wmem_max")
    with NetPath(host={"net.core.wmem_max": 1 << 20}):
        assert sysctl.read("net.core.wmem_max") == str(1 << 20)
        assert sysctl.GUARD_RECORD.exists()
    assert sysctl.read("net.core.wmem_max") == before
    assert not sysctl.GUARD_RECORD.exists()


@pytest.mark.lifecycle
def test_teardown_on_exception(root):
    with pytest.raises(RuntimeError):
        with NetPath(rtt="10ms") as path:
            names = [h.ns for h in (path.client, path.router, path.server)]
            raise RuntimeError("boom")
    assert not any(netns.exists(n) for n in names)


_RUNNER = textwrap.dedent("""
    import sys, time
    from tcplab.lab import NetPath
    with NetPath(rtt="10ms", rate="10mbit", host={"net.core.rmem_max": 3 << 20}) as path:
        print(path.client.ns, path.router.ns, path.server.ns, flush=True)
        time.sleep(60)
""")


def _start_runner():
    proc = subprocess.Popen([sys.executable, "-c", _RUNNER], stdout=subprocess.PIPE, text=True)
    names = proc.stdout.readline().split()
    assert len(names) == 3, "runner did not build its path"
    return proc, names


@pytest.mark.lifecycle
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_teardown_on_signal(root, sig):
    before = sysctl.read("net.core.rmem_max")
    proc, names = _start_runner()
    proc.send_signal(sig)
    proc.wait(timeout=20)
    assert not any(netns.exists(n) for n in names)
    assert sysctl.read("net.core.rmem_max") == before


@pytest.mark.lifecycle
def test_kill_9_then_cleanup_leaves_no_trace(root):
    before = sysctl.read("net.core.rmem_max")
    proc, names = _start_runner()
    assert sysctl.read("net.core.rmem_max") == str(3 << 20)
    proc.kill()
    proc.wait(timeout=10)
    time.sleep(0.3)  # the delay line gets SIGTERM from the kernel as its parent dies
    assert all(netns.exists(n) for n in names), "a killed run cannot tear down: cleanup must"
    report = cleanup()
    assert set(names) <= set(report.namespaces)
    assert report.host_restored["net.core.rmem_max"] == before
    assert not any(netns.exists(n) for n in names)
    assert sysctl.read("net.core.rmem_max") == before
    assert cleanup().clean  # running it again finds nothing


@pytest.mark.lifecycle
def test_cleanup_leaves_live_runs_alone(root):
    proc, names = _start_runner()
    try:
        report = cleanup()
        assert set(names) <= set(report.skipped_live)
        assert all(netns.exists(n) for n in names)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.lifecycle
def test_not_root_is_refused_before_anything(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    # Without root, user namespaces or a UML kernel, nothing can build the path.
    monkeypatch.setattr("tcplab.lab.kernels.userns_can_run", lambda: (False, "user.max_user_namespaces is 0"))
    monkeypatch.setattr("tcplab.lab.kernels.uml_can_run", lambda: (False, "no User-mode Linux kernel installed"))
    before = set(netns.listed())
    with pytest.raises(PermissionError, match="root"):
        NetPath(rtt="20ms").start()
    with pytest.raises(ParameterError, match="not root") as info:  # the host kernel asked for by name
        NetPath(rtt="20ms", kernel="host").start()
    assert info.value.name == "kernel"
    assert set(netns.listed()) == before
