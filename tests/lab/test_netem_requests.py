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


@pytest.mark.parametrize("backend, tbf_handle", [("netem", "10:"), ("delayline", "1:")])
def test_an_aqm_replaces_the_fifo_of_tbf_under_either_backend(backend, tbf_handle):
    emulator = LinkEmulator.__new__(LinkEmulator)
    emulator.backend, emulator.mtu = backend, 1500
    *_, tbf, aqm = emulator.plan("to-server", LinkShape(delay="10ms", rate="10mbit", aqm="fq_codel"))
    assert (tbf.kind, tbf.args["handle"]) == ("tbf", tbf_handle)
    assert (aqm.kind, aqm.args) == ("fq_codel", {"parent": tbf_handle + "1", "handle": "20:"})
    # Without one, tbf keeps its own FIFO of `queue` bytes, as before.
    assert [r.kind for r in emulator.plan("to-server", LinkShape(delay="10ms", rate="10mbit"))][-1] == "tbf"


@pytest.mark.parametrize("settings, name, fragment", [
    ({"aqm": "fq_codel"}, "aqm", "set rate too"),
    ({"rate": "10mbit", "aqm": "fq_codel", "queue": "100"}, "queue", "sizes its own queue"),
    ({"rate": "10mbit", "aqm": "red"}, "aqm", "one of fq_codel, cake"),
])
def test_an_aqm_needs_a_rate_and_no_queue_of_its_own(settings, name, fragment):
    with pytest.raises(link.ParameterError, match=fragment) as info:
        LinkShape(**settings)
    assert info.value.name == name


def test_a_kernel_without_the_aqm_refuses_it_by_name(monkeypatch):
    monkeypatch.setattr(link, "aqms_available", lambda: ["cake"])
    link.check_aqm([LinkShape(rate="10mbit", aqm="cake"), LinkShape()])
    with pytest.raises(link.ParameterError, match=r"has no sch_fq_codel qdisc.*one of cake") as info:
        link.check_aqm([LinkShape(rate="10mbit", aqm="fq_codel")])
    assert info.value.name == "aqm" and link.platform.release() in str(info.value)
    monkeypatch.setattr(link, "aqms_available", lambda: [])
    with pytest.raises(link.ParameterError, match="none of fq_codel, cake"):
        link.check_aqm([LinkShape(rate="10mbit", aqm="cake")])
