"""Units and parameter sets: what users type becomes numbers, or a clear error."""

import pytest

from tcplab.lab.link import LinkShape
from tcplab.lab.path import PathSpec
from tcplab.units import (ParameterError, format_byte_rate, format_duration, format_rate, format_share, format_size,
                          parse_duration, parse_percent, parse_rate, parse_size)


@pytest.mark.parametrize("text, seconds", [
    ("20ms", 0.020), ("1.5s", 1.5), ("250us", 250e-6), (20, 0.020), ("0", 0.0), ("2 ms", 0.002),
])
def test_durations(text, seconds):
    assert parse_duration("delay", text) == pytest.approx(seconds)


@pytest.mark.parametrize("text, bps", [
    ("100mbit", 100e6), ("1gbit", 1e9), ("500kbit", 500e3), (100, 100e6), ("12.5MB/s", 100e6),
])
def test_rates(text, bps):
    assert parse_rate("rate", text) == pytest.approx(bps)


def test_mbps_is_refused_as_ambiguous():
    with pytest.raises(ParameterError, match="ambiguous"):
        parse_rate("rate", "100mbps")


@pytest.mark.parametrize("text, size", [("16KB", 16384), ("22MB", 22 * 1024**2), ("1500", 1500), (8192, 8192)])
def test_sizes(text, size):
    assert parse_size("size", text) == size


@pytest.mark.parametrize("value, text", [(1023.9 * 1024, "1 MB"), (1020.4 * 1024, "1020 KB"), (31.1 * 1024, "31.1 KB"),
                                         (3 << 20, "3 MB"), (500, "500 B")])
def test_sizes_are_written_without_exponents(value, text):
    assert format_size(value) == text


@pytest.mark.parametrize("value, text", [(999.7e6, "1 Gbit/s"), (95.6e6, "95.6 Mbit/s"), (563, "563 bit/s")])
def test_rates_are_written_without_exponents(value, text):
    assert format_rate(value) == text


@pytest.mark.parametrize("value, text", [(0.9999, "1 s"), (0.99949, "999 ms"), (1023.9, "1020 s"), (152.4, "152 s"),
                                         (29e-6, "29 µs"), (0, "0 ms")])
def test_durations_are_written_without_exponents(value, text):
    assert format_duration(value) == text


@pytest.mark.parametrize("value, text", [(1.90e6, "1.9 MB/s"), (76_800, "76.8 KB/s"), (999_970, "1 MB/s"),
                                         (19, "19 B/s")])
def test_byte_rates_are_decimal_as_the_course_defines_them(value, text):
    assert format_byte_rate(value) == text


def test_percent():
    assert parse_percent("loss", "0.1%") == pytest.approx(0.1)
    assert parse_percent("loss", 1) == 1.0


@pytest.mark.parametrize("fraction, text, signed", [
    (0.354, "35.4 %", "+35.4 %"), (0.5, "50 %", "+50 %"), (0.0, "0 %", "0 %"), (-0.12, "-12 %", "-12 %"),
    # a share of 3 resent segments in 10 000 is not written as a bare 0 %
    (3e-4, "< 0.1 %", "< 0.1 %"), (-3e-4, "< 0.1 %", "< 0.1 %"),
    (12.345, "1\u202f234.5 %", "+1\u202f234.5 %"), (float("nan"), "—", "—")])
def test_shares_are_written_one_way(fraction, text, signed):
    assert format_share(fraction) == text
    assert format_share(fraction, signed=True) == signed


@pytest.mark.parametrize("settings, name, fragment", [
    ({"rtt": "-5ms"}, "rtt", "out of range"),
    ({"delay": "-1ms"}, "delay", "out of range"),
    ({"rtt": "20ms", "jitter": "-1ms"}, "jitter", "out of range"),
    ({"rtt": "20ms", "jitter": "15ms"}, "jitter", "larger than the delay"),
    ({"loss": "120%"}, "loss", "out of range"),
    ({"loss": "-1"}, "loss", "out of range"),
    ({"rate": "0"}, "rate", "out of range"),
    ({"rate": "fast"}, "rate", "not a number"),
    ({"queue": "0"}, "queue", "out of range"),
    ({"queue": "100B"}, "queue", "smaller than one"),
    ({"cc": "vegas"}, "cc", "not available"),
    ({"backend": "magic"}, "backend", "one of"),
    ({"mtu": 100}, "mtu", "out of range"),
    ({"rtt": "20ms", "delay": "5ms"}, "delay", "disagree"),
])
def test_bad_path_input_names_the_parameter_and_range(settings, name, fragment):
    with pytest.raises(ParameterError) as info:
        PathSpec.from_settings(settings)
    assert info.value.name == name
    assert fragment in str(info.value)
    assert "accepted:" in str(info.value)


def test_unknown_parameter_lists_the_known_ones():
    with pytest.raises(ParameterError) as info:
        PathSpec.from_settings({"latency": "20ms"})
    assert info.value.name == "latency"
    assert "rtt" in info.value.accepted and "rate" in info.value.accepted


def test_unknown_and_host_global_sysctls_are_refused():
    with pytest.raises(ParameterError, match="unknown sysctl"):
        PathSpec(sysctls={"tcp_no_such_knob": 1})
    with pytest.raises(ParameterError, match="whole machine"):
        PathSpec(sysctls={"net.core.rmem_max": 1 << 20})
    with pytest.raises(ParameterError, match="not a host-global"):
        PathSpec(host={"tcp_rmem": "4096 131072 6291456"})


def test_side_sysctls_are_checked_and_keyed_only_when_used():
    with pytest.raises(ParameterError, match="client or server"):
        PathSpec(side_sysctls={"router": {"tcp_window_scaling": 0}})
    with pytest.raises(ParameterError, match="unknown sysctl"):
        PathSpec(side_sysctls={"server": {"tcp_no_such_knob": 1}})
    assert "side_sysctls" not in PathSpec(rtt="20ms").to_dict()
    spec = PathSpec(side_sysctls={"server": {"tcp_window_scaling": 0}})
    assert spec.to_dict()["side_sysctls"] == {"server": {"tcp_window_scaling": 0}}


def test_rtt_splits_into_one_way_delays():
    spec = PathSpec(rtt="20ms", rate="100mbit", loss="1%")
    shapes = spec.shapes()
    for shape in shapes.values():
        assert shape.delay == pytest.approx(0.010)
        assert shape.rate == pytest.approx(100e6)
        assert shape.loss == pytest.approx(1.0)


def test_per_direction_override():
    spec = PathSpec(rtt="20ms", to_client=LinkShape(delay="10ms", loss="2%"))
    assert spec.shapes()["to_client"].loss == 2.0
    assert spec.shapes()["to_server"].loss == 0.0


def test_queue_in_packets_or_bytes():
    assert LinkShape(rate="100mbit", queue="100").queue_limit(1500) == 100 * 1514
    assert LinkShape(rate="100mbit", queue="100p").queue_limit(1500) == 100 * 1514
    assert LinkShape(rate="100mbit", queue="64KB").queue_limit(1500) == 65536
    # unset: one bandwidth-delay product of the round trip, at least 64 KB
    assert LinkShape(delay="10ms", rate="100mbit").queue_limit(1500) == 250_000
    assert LinkShape(delay="1ms", rate="10mbit").queue_limit(1500) == 65536


def test_help_rows_describe_every_field():
    rows = {name: (default, accepted, text) for name, default, accepted, text in PathSpec.help_rows()}
    assert set(rows) >= {"rtt", "delay", "jitter", "loss", "rate", "queue", "backend", "cc"}
    assert "ms" in rows["rtt"][1]
    assert rows["backend"][0] == "auto"
