"""Case helpers for the socket-buffer cases, on synthetic tables with known answers; the
machine's buffer limits on the real kernel, with stock Linux values set for the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tcplab.cases import CaseLab, buffers
from tcplab.words import Messages
from tcplab.observe.sendmsg import parse_sendmsg, sendmsg_trace
from tcplab.report import CasePage
from tcplab.lab import PathSpec, sysctl, tracefs
from tcplab.traffic import Bulk
from tcplab.units import ParameterError


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
    assert frame["variant"].tolist() == ["16KB", "16KB"] and frame["goodput Mbit/s"].tolist() == [8.0, 16.0]


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
    events = parse_sendmsg(SENDMSG_TRACE)
    assert events["pid"].unique().tolist() == [844] and len(events) == 4
    assert events["addr"].iloc[0] == 0 and events["len"].tolist() == [0, 28960, 31856, 100]


def test_sendmsg_summary_tells_checked_new_buffers_from_unchecked_appends():
    summary = buffers.sendmsg_summary(parse_sendmsg(SENDMSG_TRACE), 2)
    assert summary["application writes"] == 2 and summary["copy-loop turns"] == 4
    assert summary["new buffer, write queue empty (checked)"] == 1
    assert summary["new buffer, tail full (checked)"] == 1
    assert summary["appended to an unfinished tail (not checked)"] == 2
    assert summary["tail full, per write"] == 0.5


def test_sendmsg_trace_leaves_no_instance_behind(root):
    with sendmsg_trace() as read:
        assert "tracer" in read()
    mine = [p for p in (tracefs.TRACEFS / "instances").iterdir() if p.name.startswith(f"{tracefs.INSTANCE_PREFIX}{os.getpid()}-")]
    assert mine == []


# --------------------------------------------------------------- the machine's buffer limits

#: Linux's own default of net.core.wmem_max and rmem_max; a machine's own may be either (read, never assumed).
STOCK = 212992
LIMITS = (buffers.WMEM_MAX, buffers.RMEM_MAX)


class _KeptLab:
    """A lab stand-in whose kept values are given: the helper's arithmetic without a kernel."""

    mode, kernel, trials = "replay", None, {}

    def __init__(self, found):
        self.kept = {"buffer limits": found}

    def keep(self, name, compute):
        return self.kept[name]


def _found(wmem_max, rmem_max):
    return {buffers.WMEM_MAX: wmem_max, buffers.RMEM_MAX: rmem_max,
            buffers.TCP_RMEM: "4096 131072 6291456", buffers.TCP_WMEM: "4096 16384 4194304"}


def test_an_autotuning_cap_sets_tcp_rmem_2_and_lowers_the_start_only_below_it():
    assert buffers.autotuning_cap("tcp_rmem_max", 524288) == "4096 131072 524288"
    assert buffers.autotuning_cap("tcp_rmem_max", "64KB") == "4096 65536 65536"  # a socket starts at tcp_rmem[1]
    assert buffers.autotuning_cap("tcp_rmem_max", 4096) == "4096 4096 4096"
    for bad, accepted in ((4095, "at least 4096 B"), ("lots", "a size such as")):
        with pytest.raises(ParameterError) as err:
            buffers.autotuning_cap("tcp_rmem_max", bad)
        assert str(err.value).startswith("tcp_rmem_max: ") and accepted in str(err.value)


def test_limits_are_raised_to_what_a_variant_asks_only_when_below():
    spec = PathSpec(rtt="20ms")
    stock = buffers.BufferLimits(_KeptLab(_found(STOCK, STOCK)))
    both = Bulk(size="1MB", sndbuf="256KB", rcvbuf="1MB")
    assert stock.needed(spec, both) == {buffers.WMEM_MAX: 262144, buffers.RMEM_MAX: 1048576}
    assert stock.spec(spec, both).host == {buffers.WMEM_MAX: 262144, buffers.RMEM_MAX: 1048576}
    assert stock.needed(spec, Bulk(size="1MB", sndbuf="128KB")) == {}
    assert stock.spec(spec, Bulk(size="1MB", sndbuf="128KB")) is spec  # the same runs as before
    # the largest of several variants; a variant that wants the clamp, or a spec that sets the
    # limit itself, is the notebook's choice
    assert stock.needed(spec, Bulk(sndbuf="256KB"), Bulk(sndbuf="1MB")) == {buffers.WMEM_MAX: 1048576}
    assert stock.needed(spec, Bulk(sndbuf="256KB", clamp_ok=True)) == {}
    assert stock.needed(PathSpec(host={"net.core.wmem_max": 131071}), Bulk(sndbuf="256KB")) == {}
    raised = stock.spec(PathSpec(host={"net.ipv4.tcp_mem": "64 96 128"}), Bulk(sndbuf="1MB"))
    assert raised.host == {"net.ipv4.tcp_mem": "64 96 128", buffers.WMEM_MAX: 1048576}
    assert stock.in_force(buffers.WMEM_MAX, raised) == 1048576 and stock.in_force(buffers.RMEM_MAX, raised) == STOCK
    # a machine with larger limits is never lowered
    big = buffers.BufferLimits(_KeptLab(_found(4194304, 4194304)))
    assert big.needed(spec, both) == {} and big.spec(spec, both) is spec
    assert (big.wmem_max, big.rmem_max, big.tcp_rmem_max, big.tcp_wmem_max) == (4194304, 4194304, 6291456, 4194304)


@pytest.fixture
def stock_limits(root):
    """Both limits at stock Linux's value for the test, restored by the guard after it."""
    with sysctl.HostGuard({key: STOCK for key in LIMITS}):
        yield


@pytest.fixture
def outer_guard(root):
    """A guard held around the test that sets the write limit to a value the machine does not
    have, so a record that kept the outer guard's value instead of the machine's own is caught
    whatever the machine's limits are (stock 212992 or raised by its owner)."""
    own = {key: sysctl.read(key) for key in LIMITS}
    outer = STOCK if own[buffers.WMEM_MAX] != str(STOCK) else STOCK + 4096
    with sysctl.HostGuard({buffers.WMEM_MAX: outer, buffers.RMEM_MAX: STOCK}):
        yield SimpleNamespace(own=own, outer=str(outer))


@pytest.mark.kernel
def test_a_guard_nests_inside_one_this_process_holds(outer_guard):
    with sysctl.HostGuard({buffers.WMEM_MAX: 262144, "net.ipv4.tcp_mem": "1000000 2000000 3000000"}):
        assert sysctl.read(buffers.WMEM_MAX) == "262144"
        # after a crash here, cleanup must restore the machine's own values, not the outer guard's
        original = json.loads(sysctl.GUARD_RECORD.read_text())["original"]
        assert original[buffers.WMEM_MAX] == outer_guard.own[buffers.WMEM_MAX] and "net.ipv4.tcp_mem" in original
    assert sysctl.read(buffers.WMEM_MAX) == outer_guard.outer
    assert set(json.loads(sysctl.GUARD_RECORD.read_text())["original"]) == set(LIMITS)


_CHILD_GUARD = """
import json, sys
from tcplab.lab import sysctl
with sysctl.HostGuard({"net.core.wmem_max": 262144}, wait=5):
    print(sysctl.read("net.core.wmem_max"), json.loads(sysctl.GUARD_RECORD.read_text())["original"]["net.core.wmem_max"])
"""


@pytest.mark.kernel
def test_a_guard_nests_inside_one_an_ancestor_holds(outer_guard):
    """The course run with a guard held: a notebook's kernel, a descendant of the process
    holding the guard, raises one limit for its path and puts back the value it found."""
    child = subprocess.run([sys.executable, "-c", _CHILD_GUARD], capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr  # no wait for the lock the ancestor holds
    raised, saved = child.stdout.split()
    assert raised == "262144" and saved == outer_guard.own[buffers.WMEM_MAX]  # the machine's own value
    assert sysctl.read(buffers.WMEM_MAX) == outer_guard.outer
    assert set(json.loads(sysctl.GUARD_RECORD.read_text())["original"]) == set(LIMITS)


@pytest.mark.kernel
def test_on_stock_limits_a_variant_runs_with_its_limit_raised_then_restored(stock_limits, tmp_path):
    lab = CaseLab("98-fixture", mode="live", kernel="host", runs_dir=tmp_path / "runs")
    limits = buffers.BufferLimits(lab)
    assert (limits.wmem_max, limits.rmem_max) == (STOCK, STOCK)
    spec = PathSpec(rtt="2ms", rate="100mbit")
    fixed = Bulk(size="256KB", sndbuf="256KB", cc="cubic")
    observe = dict(capture="none", telemetry=False, tracepoints=False)
    with lab.path(limits.spec(spec, fixed)) as path:
        assert sysctl.read(buffers.WMEM_MAX) == "262144" and sysctl.read(buffers.RMEM_MAX) == str(STOCK)
        trial = lab.run("sndbuf-256KB", fixed, path=path, observe=observe)
    assert trial.socket("server")["sndbuf"] == 2 * 262144  # not clamped to 2 x 212992
    assert sysctl.read(buffers.WMEM_MAX) == str(STOCK)  # back to the value the path found
    small = lab.run("sndbuf-16KB", Bulk(size="256KB", sndbuf="16KB", cc="cubic"),
                    path=limits.spec(spec, Bulk(sndbuf="16KB")), observe=observe)
    assert small.spec.host == {}  # nothing to raise for 16 KB
    note = CasePage(lab).limits_note(limits)
    assert f"`net.core.wmem_max` was {STOCK} on this machine" in note
    assert f"the variant {Messages().variant(lab.case_id, 'sndbuf-256KB')} raised it to 262144 for its run" in note
    assert f"it read {STOCK} again after the runs" in note and "rmem_max" not in note
