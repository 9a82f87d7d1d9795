"""Workload parameters: defaults, help, and bad input refused before anything runs."""

from __future__ import annotations

import pytest

from tcplab.traffic import WORKLOADS, AppResult, Workload
from tcplab.units import ParameterError

EXPECTED = {"bulk", "reqresp", "slowreader", "ratelimited", "http", "iperf", "idleburst", "shortconns", "probed"}
LIMITS = {"net.core.wmem_max": 212992, "net.core.rmem_max": 212992}


def test_registry_has_every_workload_under_its_name():
    assert set(WORKLOADS) == EXPECTED
    for name, cls in WORKLOADS.items():
        assert issubclass(cls, Workload) and cls.name == name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_defaults_build_and_help_lists_every_parameter(name):
    cls = WORKLOADS[name]
    workload = cls()
    assert workload.sender() in ("server", "client")
    rows = cls.help_rows()
    assert [r[0] for r in rows[-3:]] == ["port", "timeout", "cc"], "own parameters first"
    assert {r[0] for r in rows} == set(workload.to_dict())
    assert all(default and accepted and text for _, default, accepted, text in rows)


@pytest.mark.parametrize("settings, name, accepted", [
    ({"size": 0}, "size", "from 0 B (excluded)"),
    ({"size": "-1KB"}, "size", "from 0 B (excluded)"),
    ({"read_rate": "-1mbit"}, "read_rate", "above 0 bit/s"),
    ({"write_size": 0}, "write_size", "from 1 B"),
    ({"direction": "sideways"}, "direction", "one of download, upload"),
    ({"cc": "vegas-nonexistent"}, "cc", "one of"),
    ({"timeout": "0s"}, "timeout", "from 100 ms"),
])
def test_bad_values_name_the_parameter_and_its_range(settings, name, accepted):
    with pytest.raises(ParameterError) as caught:
        WORKLOADS["bulk"].from_settings(settings)
    assert caught.value.name == name
    assert accepted in caught.value.accepted


def test_unknown_option_is_refused_with_the_known_ones():
    with pytest.raises(ParameterError) as caught:
        WORKLOADS["reqresp"].from_settings({"requests": 3, "rate": "10mbit"})
    assert caught.value.name == "rate"
    assert "request_size" in caught.value.accepted and "split" in caught.value.accepted


def test_a_slow_reader_needs_a_pause_or_a_pace():
    with pytest.raises(ParameterError) as caught:
        WORKLOADS["slowreader"](pause_after=None)
    assert caught.value.name == "pause_after"
    WORKLOADS["slowreader"](pause_after=None, read_rate="1mbit")


@pytest.mark.parametrize("name, settings, key", [
    ("bulk", {"sndbuf": "8MB"}, "net.core.wmem_max"),
    ("bulk", {"rcvbuf": "1MB"}, "net.core.rmem_max"),
    ("http", {"sndbuf": "256KB"}, "net.core.wmem_max"),
    ("iperf", {"window": "512KB"}, "net.core.wmem_max"),
])
def test_a_buffer_above_the_host_limit_says_what_the_kernel_would_clamp_it_to(name, settings, key):
    workload = WORKLOADS[name](**settings)
    with pytest.raises(ParameterError) as caught:
        workload.check_limits(LIMITS)
    assert caught.value.name == next(iter(settings))
    message = str(caught.value)
    assert f"above {key} 212992" in message and "clamp it to 425984 bytes" in message
    assert f"host={{'{key}'" in message


def test_clamp_ok_lets_a_buffer_above_the_host_limit_through_and_is_off_by_default():
    assert WORKLOADS["bulk"]().clamp_ok is False
    WORKLOADS["bulk"](sndbuf="256KB", clamp_ok=True).check_limits(LIMITS)
    with pytest.raises(ParameterError):
        WORKLOADS["bulk"](sndbuf="256KB").check_limits(LIMITS)
    assert "clamp_ok" in {r[0] for r in WORKLOADS["bulk"].help_rows()}


def test_buffers_within_limits_pass():
    WORKLOADS["bulk"](sndbuf="16KB", rcvbuf="64KB").check_limits(LIMITS)
    WORKLOADS["bulk"]().check_limits(LIMITS)


def test_app_result_round_trips_and_derives_goodput():
    result = AppResult("bulk", True, None, bytes=1_000_000, start=10.0, end=12.0)
    assert result.duration == 2.0 and result.goodput_bps == 4e6
    assert AppResult.from_dict(result.to_dict()) == result
    with pytest.raises(ValueError):
        AppResult.from_dict({**result.to_dict(), "colour": "red"})
