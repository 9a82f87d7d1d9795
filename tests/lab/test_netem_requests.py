"""The netem backend cannot run on this CI kernel (no sch_netem), so its exact pyroute2
requests are checked here, encoded by pyroute2 itself into the netlink attributes the
kernel would receive."""

import pytest
from pyroute2.netlink.rtnl.tcmsg import sched_netem, sched_tbf
from pyroute2.netlink.rtnl.tcmsg.common import percent2u32, time2tick

from tcplab.lab import link
from tcplab.lab.link import LinkEmulator, LinkShape, netem_limit, netem_requests


def test_delay_jitter_loss_become_one_netem_qdisc_at_the_root():
    shape = LinkShape(delay="10ms", jitter="1ms", loss="1%")
    (req,) = netem_requests("to-server", shape, 1500)
    assert (req.command, req.kind, req.ifname) == ("add", "netem", "to-server")
    assert req.args["handle"] == "1:"
    encoded = sched_netem.get_parameters(dict(req.args))
    assert encoded["delay"] == time2tick(10_000)
    assert encoded["jitter"] == time2tick(1_000)
    assert encoded["loss"] == percent2u32(1.0)
    assert encoded["limit"] == req.args["limit"]


def test_rate_adds_tbf_as_netem_child_with_the_queue_as_limit():
    shape = LinkShape(delay="10ms", rate="100mbit", queue="100")
    netem, tbf = netem_requests("to-client", shape, 1500)
    assert netem.kind == "netem" and tbf.kind == "tbf"
    assert tbf.args["parent"] == "1:1"
    encoded = sched_tbf.get_parameters(dict(tbf.args))
    parms = dict(encoded["attrs"])["TCA_TBF_PARMS"]
    assert parms["rate"] == 100_000_000 // 8          # tbf counts bytes per second
    assert parms["limit"] == 100 * 1514                # the bottleneck queue, in L2 bytes


def test_rate_only_is_a_root_tbf_without_netem():
    (tbf,) = netem_requests("to-client", LinkShape(rate="10mbit"), 1500)
    assert tbf.kind == "tbf" and tbf.args["handle"] == "1:" and "parent" not in tbf.args


def test_unshaped_direction_sends_nothing():
    assert netem_requests("to-client", LinkShape(), 1500) == []


@pytest.mark.parametrize("delay, rate", [("20ms", None), ("200ms", "1gbit"), ("100ms", "100mbit")])
def test_netem_limit_never_caps_throughput(delay, rate):
    """netem's default of 1000 packets silently drops above 1000 packets per delay."""
    shape = LinkShape(delay=delay, rate=rate)
    line_rate = shape.rate or link._UNSHAPED_RATE
    packets_in_flight = line_rate / 8 * shape.delay / 1514
    assert netem_limit(shape, 1500) >= packets_in_flight
    assert netem_limit(shape, 1500) >= 1000


def test_delayline_backend_plans_only_tbf_in_the_kernel():
    emulator = LinkEmulator.__new__(LinkEmulator)
    emulator.backend, emulator.mtu = "delayline", 1500
    shape = LinkShape(delay="10ms", loss="1%", rate="100mbit")
    (req,) = emulator.plan("to-server", shape)
    assert req.kind == "tbf"
    emulator.backend = "netem"
    assert [r.kind for r in emulator.plan("to-server", shape)] == ["netem", "tbf"]


def test_backend_choice_follows_the_probe(monkeypatch):
    monkeypatch.setattr(link, "netem_available", lambda: False)
    assert link.choose_backend("auto") == "delayline"
    with pytest.raises(link.ParameterError, match="no sch_netem"):
        link.choose_backend("netem")
    monkeypatch.setattr(link, "netem_available", lambda: True)
    assert link.choose_backend("auto") == "netem"
    assert link.choose_backend("delayline") == "delayline"
