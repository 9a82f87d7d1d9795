"""nstat counters of a namespace: parsing /proc/net/netstat and snmp, reading them per namespace."""

from __future__ import annotations

import pytest

from tcplab.lab import netns
from tcplab.observe.counters import counter_delta, counters_in, parse_counters

NETSTAT = """TcpExt: SyncookiesSent DelayedACKs TCPToZeroWindowAdv
TcpExt: 0 12 3
IpExt: InNoRoutes InOctets
IpExt: 0 4096
"""


def test_parse_counters_uses_nstat_names():
    counters = parse_counters(NETSTAT + "Tcp: RtoAlgorithm MaxConn\nTcp: 1 -1\n")
    assert counters == {"TcpExtSyncookiesSent": 0, "TcpExtDelayedACKs": 12, "TcpExtTCPToZeroWindowAdv": 3,
                        "IpExtInNoRoutes": 0, "IpExtInOctets": 4096, "TcpRtoAlgorithm": 1, "TcpMaxConn": -1}


def test_counter_delta_keeps_what_moved():
    assert counter_delta({"A": 1, "B": 5}, {"A": 1, "B": 7, "C": 2}) == {"B": 2, "C": 2}


@pytest.mark.kernel
def test_counters_are_per_namespace(root):
    name = "tcplab-test-counters"
    netns.create(name)
    try:
        fresh = counters_in(name)
        assert fresh["TcpExtTCPToZeroWindowAdv"] == 0 and fresh["TcpActiveOpens"] == 0
    finally:
        netns.remove(name)
